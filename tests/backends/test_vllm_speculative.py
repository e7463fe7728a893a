"""Speculative decoding on the vLLM backend (``draft.kind`` -> vLLM's ``speculative_config``): greedy output
with speculation equals greedy output without it (the session's plain vLLM backend: the reference), the
acceptance counters come back, and a draft model pushed with ``update_draft`` is the one vLLM drafts with
(the drafter refit that keeps an online-trained draft from going stale). Sampled log-probs under speculation
are wrong in vLLM 0.32 (pinned below), which is why a training run does not speculate on vLLM.

The draft-model case drafts SmolLM2 with SmolLM2 itself: with the same weights every greedy draft token is
accepted; with the drafter refit to random weights almost none is (and the output, lossless, is unchanged);
refit back to the real weights, all are accepted again. Only a drafter that really took the new weights
moves the acceptance rate both ways."""
import pytest
import torch

from trajkit.engine.params import SamplingParams

PROMPTS = ["1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2,", "The cat sat on the mat. The cat sat on the mat. The cat",
           "Write a haiku about the sea.\n"]
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=24)


@pytest.fixture(scope="module")
def prompt_ids(smollm2_folder):
    from trajkit.models.load import load_tokenizer

    tok = load_tokenizer(smollm2_folder, what="smollm2")
    return [tok(p)["input_ids"] for p in PROMPTS]


@pytest.fixture(scope="module")
def plain_greedy(vllm_backend, prompt_ids):
    return [c.token_ids for c in vllm_backend.generate(prompt_ids, GREEDY)]


def speculative(kind, vllm_python, smollm2_folder, k):
    from trajkit.backends.vllm import VllmBackend, speculative_config

    return VllmBackend(smollm2_folder, python=vllm_python, max_model_len=1024, seed=0,
                       speculative_config=speculative_config(kind, k, smollm2_folder))


def test_ngram_speculation_is_lossless_and_reports_its_acceptance(ray_cluster, vllm_python, smollm2_folder,
                                                                  prompt_ids, plain_greedy, reference_model):
    from tests.backends.conftest import reference_logprobs
    from trajkit.backends.vllm import LOGPROB_ATOL

    backend = speculative("ngram", vllm_python, smollm2_folder, 3)
    try:
        out = backend.generate(prompt_ids, GREEDY)
        stats = backend.stats()
        sampled = backend.generate(prompt_ids, SamplingParams(temperature=0.7, max_new_tokens=12, seed=1))
    finally:
        backend.close()
    assert [c.token_ids for c in out] == plain_greedy
    assert out.stats.proposed > 0 and 0 < out.stats.accepted <= out.stats.proposed  # the repeats are drafted
    assert stats["draft_proposed"] == out.stats.proposed and 0 < stats["acceptance_rate"] <= 1
    # A canary for trajkit.rl.backend's refusal: sampled under speculation, vLLM 0.32's log-probs are NOT the
    # sampling distribution's (an independent float32 forward at T=0.7; measured up to 23 nats off), so a
    # training run may not speculate on vLLM. When this fails, vLLM got it right: lift the refusal.
    assert sampled.stats.proposed > 0
    worst = max(max(abs(a - b) for a, b in zip(c.logprobs, reference_logprobs(reference_model, p, c.token_ids, 0.7)))
                for p, c in zip(prompt_ids, sampled))
    assert worst > 100 * LOGPROB_ATOL, worst
    assert backend.guarantees.logprob_atol == float("inf")  # and the backend says it promises nothing there


@pytest.fixture(scope="module")
def draft_backend(ray_cluster, vllm_python, smollm2_folder):
    """vLLM speculating SmolLM2 with SmolLM2 itself as the draft model (k=2), for this module."""
    backend = speculative("model", vllm_python, smollm2_folder, 2)
    yield backend
    backend.close()


def test_a_refit_draft_model_is_the_one_vllm_drafts_with(draft_backend, prompt_ids, plain_greedy, reference_model):
    real = {k: v.detach().clone() for k, v in reference_model.state_dict().items()}
    g = torch.Generator().manual_seed(0)
    noise = {k: torch.randn(v.shape, generator=g) * 0.02 for k, v in real.items()}
    rates = []
    for weights in (None, noise, real):
        if weights is not None:
            draft_backend.update_draft(weights)
        out = draft_backend.generate(prompt_ids, GREEDY)
        assert [c.token_ids for c in out] == plain_greedy  # lossless whatever the draft
        rates.append(out.stats.acceptance_rate)
    same, random, restored = rates
    assert same > 0.9 and restored > 0.9  # the target's own weights: its greedy drafts are accepted
    assert random < 0.3  # random draft weights: vLLM really drafts with what was pushed
