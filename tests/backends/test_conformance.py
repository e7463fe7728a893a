"""One conformance suite for every generation backend (trajkit's engine, the exact reference, and vLLM in
its venv), against an independent float32 HF forward: greedy tokens of ragged batches, stop ids, stop strings, seeds,
log-probs under the sampling distribution, and a weight update that must give exactly the new weights'
greedy output. Each backend is held to what it declares (``backend.guarantees``)."""
import pytest
import torch

from tests.backends.conftest import reference_greedy, reference_logprobs
from trajkit.backends.base import Backend
from trajkit.engine import SamplingParams

N = 8


def test_backend_follows_the_protocol(backend):
    assert isinstance(backend, Backend)
    assert backend.vocab_size == 49152
    assert set(backend.stats()) >= {"backend", "calls", "new_tokens", "policy_version"}


def test_ragged_greedy_batch_equals_the_reference_per_row(backend, prompts, reference_model):
    assert len({len(p) for p in prompts}) == len(prompts)  # ragged
    out = backend.generate(prompts, SamplingParams(temperature=0.0, max_new_tokens=N))
    for i, (p, c) in enumerate(zip(prompts, out)):
        assert c.token_ids == reference_greedy(reference_model, p, N), f"row {i}"
        assert c.finish_reason == "length" and c.logprobs == [0.0] * N
    assert out.policy_version == backend.policy_version


def test_stop_id_ends_the_row_on_it(backend, prompts, reference_model):
    free = reference_greedy(reference_model, prompts[0], N)
    stop = free[3]
    j = free.index(stop)
    out = backend.generate(prompts[:1], SamplingParams(temperature=0.0, max_new_tokens=N, stop_token_ids=[stop]))
    assert out[0].token_ids == free[:j + 1]
    assert out[0].finish_reason == "stop"


def test_stop_string_ends_the_row_at_the_token_completing_it(backend, prompts, reference_model, smollm2_folder):
    """A stop string of two greedy tokens' text: the row ends at the token that completes it (kept), found on
    the reference's decoded prefixes; nothing past it is sampled."""
    from trajkit.engine.stoptext import first_completing
    from trajkit.models.load import load_tokenizer

    tok = load_tokenizer(smollm2_folder, what="smollm2")
    free = reference_greedy(reference_model, prompts[1], N)
    text = tok.decode(free[3:5])
    k = first_completing(free, (text,), tok.decode)
    assert k is not None and k <= 5
    out = backend.generate(prompts[1:2], SamplingParams(temperature=0.0, max_new_tokens=N, stop_strings=[text]))
    assert out[0].token_ids == free[:k]
    assert out[0].finish_reason == "stop"
    assert tok.decode(out[0].token_ids).endswith(text)


def test_seeds_fix_the_samples(backend, prompts):
    params = SamplingParams(temperature=1.0, max_new_tokens=N, seed=7)
    a = backend.generate(prompts, params)
    b = backend.generate(prompts, params)
    c = backend.generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=N, seed=8))
    assert [x.token_ids for x in a] == [x.token_ids for x in b]
    assert [x.token_ids for x in a] != [x.token_ids for x in c]
    # one SamplingParams per row: each row is its own request, so a row does not depend on its neighbours: beside
    # other prompts of the same lengths it samples the same tokens. Not asserted: the row alone. The batch then
    # has other shapes, the float kernels another reduction order, and on an AVX-512 machine one near-tie of
    # SmolLM2's flips (3470 vs 3474 at the 4th token); float arithmetic does not promise batch-size invariance.
    rows = [SamplingParams(temperature=1.0, max_new_tokens=N, seed=s) for s in (3, 4, 5)]
    together = backend.generate(prompts, rows)
    others = [list(reversed(p)) for p in prompts]  # the same lengths, other tokens
    beside_others = backend.generate([others[0], prompts[1], others[2]], rows)
    assert together[1].token_ids == beside_others[1].token_ids
    assert together[0].token_ids != beside_others[0].token_ids  # the neighbours did change


def test_logprobs_are_the_sampling_distributions(backend, prompts, reference_model):
    """At T=0.7 each token's log-prob equals log softmax(logits / 0.7) of a float32 forward, to the
    backend's declared tolerance (trajkit: exact up to float rounding)."""
    t = 0.7
    out = backend.generate(prompts, SamplingParams(temperature=t, max_new_tokens=N, seed=1))
    worst = 0.0
    for p, c in zip(prompts, out):
        ref = reference_logprobs(reference_model, p, c.token_ids, t)
        worst = max(worst, max(abs(a - b) for a, b in zip(c.logprobs, ref)))
    assert worst <= backend.guarantees.logprob_atol, worst
    print(f"{backend.name}: max |logp - fp32 forward logp| at T={t}: {worst:.2e}")
    # and not the raw (T=1) log-probs, which differ by far more than the tolerance
    raw = reference_logprobs(reference_model, prompts[0], out[0].token_ids, 1.0)
    assert max(abs(a - b) for a, b in zip(out[0].logprobs, raw)) > 100 * backend.guarantees.logprob_atol


@torch.no_grad()
def _perturb(model, seed: int = 0) -> None:
    """Add seeded noise (10% of each matrix's std) to every weight matrix of ``model``, in place; the
    embedding included, so a tied lm_head changes with it."""
    g = torch.Generator().manual_seed(seed)
    for p in model.parameters():  # a tied lm_head is the embedding's parameter, visited once
        if p.ndim == 2:
            p.add_(0.1 * p.std() * torch.randn(p.shape, generator=g, dtype=p.dtype))


def test_weight_update_gives_the_new_weights_greedy_output(backend, prompts, reference_model, smollm2_folder):
    from trajkit.models.load import load_model

    new_model = load_model(smollm2_folder, dtype=torch.float32)
    _perturb(new_model)
    new_weights = new_model.state_dict()
    before = backend.generate(prompts, SamplingParams(temperature=0.0, max_new_tokens=N))
    version = backend.policy_version
    try:
        assert backend.update_weights(new_weights) == version + 1
        after = backend.generate(prompts, SamplingParams(temperature=0.0, max_new_tokens=N))
        assert after.policy_version == version + 1
        expected = [reference_greedy(new_model, p, N) for p in prompts]
        assert expected != [c.token_ids for c in before]  # the update must show
        assert [c.token_ids for c in after] == expected
    finally:
        backend.update_weights(reference_model.state_dict())
    restored = backend.generate(prompts, SamplingParams(temperature=0.0, max_new_tokens=N))
    assert [c.token_ids for c in restored] == [c.token_ids for c in before]


def test_a_row_past_the_context_is_refused_naming_it(backend, prompts):
    from trajkit.errors import ConfigError

    limit = getattr(backend, "max_model_len", None) or backend.model.config.max_position_embeddings
    with pytest.raises(ConfigError, match="row 1: prompt \\+ max_new_tokens"):
        backend.generate([prompts[0], [1] * limit], SamplingParams(max_new_tokens=4))


def test_an_error_inside_the_vllm_actor_comes_back_with_its_message(vllm_backend, prompts):
    """vLLM itself rejects the row (temperature -1): the call fails with vLLM's message, never hangs, and the
    actor keeps serving."""
    from trajkit.backends.actors import BackendError, call

    bad = [{"temperature": -1.0, "max_tokens": 2, "logprobs": 0}]
    with pytest.raises(BackendError, match="(?s)vLLM generate failed in its Ray actor.*temperature must be "
                                           "non-negative"):
        call(vllm_backend.actor.generate.remote(prompts[:1], bad), "vLLM generate", 120)
    assert len(vllm_backend.generate(prompts[:1], SamplingParams(max_new_tokens=2, seed=0))[0].token_ids) == 2
