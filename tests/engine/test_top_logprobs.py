"""``SamplingParams.top_logprobs``: per generated token, the most likely tokens of the distribution it was
sampled from. Reference: a no-cache forward over prompt + completion, warped with the row's parameters
(``warp_probs``), top-k taken there. Checked for plain sampling, speculative sampling and both
continuous-batching sessions, with a row that asked for none and a top-k filter that leaves fewer tokens."""
import pytest
import torch

from trajkit.engine import Engine, SamplingParams
from trajkit.engine.drafters import DraftModel
from trajkit.engine.warp import row_params, warp_probs
from trajkit.errors import ConfigError

from .helpers import perturbed_copy, target_model
from .test_session import PROMPTS, SPEC_WIDE, _run


@torch.no_grad()
def _reference(model, prompt, completion, params: SamplingParams):
    """[(id, log p)] of the k most likely tokens (finite only) at every completion position."""
    ids = torch.tensor([prompt + completion])
    logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1]  # [len(completion), V]
    n = logits.shape[0]
    probs = warp_probs(logits, *row_params([params.temperature] * n, [params.top_k] * n, [params.top_p] * n, "cpu"))
    values, top = probs.topk(params.top_logprobs, dim=-1)
    return [[(int(t), float(v.log())) for t, v in zip(row_ids, row_vals) if v > 0] for row_ids, row_vals in zip(top, values)]


def _check(model, prompt, completion, params):
    ref = _reference(model, prompt, completion.token_ids, params)
    got = completion.top_logprobs
    assert got is not None and len(got) == len(completion.token_ids) == len(ref)
    for g, r, token, lp in zip(got, ref, completion.token_ids, completion.logprobs):
        assert [t for t, _ in g] == [t for t, _ in r]
        assert [v for _, v in g] == pytest.approx([v for _, v in r], abs=1e-6)
        assert token in [t for t, _ in g] or lp < g[-1][1] + 1e-9  # the sampled token, unless less likely
        assert [v for _, v in g] == sorted((v for _, v in g), reverse=True)


PARAMS = [SamplingParams(temperature=1.0, max_new_tokens=12, seed=1, top_logprobs=3),
          SamplingParams(temperature=0.8, top_k=2, max_new_tokens=9, seed=2, top_logprobs=4),  # 2 survive top-k
          SamplingParams(temperature=1.0, max_new_tokens=7, seed=3)]  # none asked


@pytest.mark.parametrize("speculative", [False, True])
def test_generate_records_the_top_tokens_of_each_sampled_position(speculative):
    model = target_model(SPEC_WIDE, seed=1, dtype=torch.float64)
    drafter = DraftModel(perturbed_copy(model, 0.3, seed=7)) if speculative else None
    engine = Engine(model, drafter, num_draft_tokens=3) if speculative else Engine(model)
    prompts = [PROMPTS[0], PROMPTS[2], PROMPTS[3]]
    out = engine.generate(prompts, PARAMS)
    for prompt, completion, params in zip(prompts[:2], out[:2], PARAMS[:2]):
        _check(model, prompt, completion, params)
    assert all(len(t) == 2 for t in out[1].top_logprobs)  # top_k=2 leaves two tokens with p > 0
    assert out[2].top_logprobs is None
    assert engine.generate(prompts, PARAMS)[0].token_ids == out[0].token_ids  # asking for them changes nothing
    plain = [SamplingParams(temperature=p.temperature, top_k=p.top_k, max_new_tokens=p.max_new_tokens, seed=p.seed)
             for p in PARAMS]
    assert [c.token_ids for c in engine.generate(prompts, plain)] == [c.token_ids for c in out]


@pytest.mark.parametrize("speculative", [False, True])
def test_sessions_record_them_for_rows_that_join(speculative):
    model = target_model(SPEC_WIDE, seed=1, dtype=torch.float64)
    drafter = DraftModel(perturbed_copy(model, 0.3, seed=7)) if speculative else None
    engine = Engine(model, drafter, num_draft_tokens=2) if speculative else Engine(model)
    out = _run(engine.session(), {0: [(PROMPTS[0], PARAMS[0])], 2: [(PROMPTS[2], PARAMS[1]), (PROMPTS[3], PARAMS[2])]})
    _check(model, PROMPTS[0], out[0][0], PARAMS[0])
    _check(model, PROMPTS[2], out[1][0], PARAMS[1])
    assert out[2][0].top_logprobs is None


def test_top_logprobs_is_validated():
    with pytest.raises(ConfigError, match="top_logprobs must be an integer in \\[0, 20\\]"):
        SamplingParams(top_logprobs=21)
