"""Engine inputs: temperature floor, NaN/inf logits, id validation, numpy ids, params=None, positions."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.engine.helpers import perturbed_copy, target_model
from trajkit.engine import DraftModel, Engine, SamplingParams
from trajkit.engine.params import MIN_TEMPERATURE
from trajkit.errors import ConfigError, InputError, ModelError
from trajkit.models.spec import TinySpec

SPEC = TinySpec(vocab_size=16, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=64,
                max_positions=32)
PROMPTS = [[3, 4], [1, 2, 3, 4, 5, 6]]


@pytest.fixture(scope="module")
def target():
    return target_model(SPEC, seed=11)


def _engines(model):
    return [Engine(model), Engine(model, DraftModel(perturbed_copy(model, 0.5, seed=1)), num_draft_tokens=2)]


@pytest.mark.parametrize("temperature", [1e-46, 1e-45, 1e-40, 1e-20, MIN_TEMPERATURE / 2])
def test_temperature_below_the_floor_is_greedy(target, temperature):
    params = SamplingParams(temperature=temperature, max_new_tokens=12, seed=3)
    assert params.temperature == 0.0 and params.greedy
    greedy = SamplingParams(temperature=0.0, max_new_tokens=12, seed=3)
    for engine in _engines(target):
        assert [c.token_ids for c in engine.generate(PROMPTS, params)] == \
               [c.token_ids for c in engine.generate(PROMPTS, greedy)]


def test_temperature_at_the_floor_samples():
    assert SamplingParams(temperature=MIN_TEMPERATURE).temperature == MIN_TEMPERATURE


@pytest.mark.parametrize("poison", [float("nan"), float("inf")])
def test_nonfinite_logits_name_row_and_step(poison):
    model = target_model(SPEC, seed=11)
    with torch.no_grad():
        model.get_input_embeddings().weight[9] = poison  # only a row holding token 9 goes bad
    prompts = [[3, 4], [1, 9]]
    for engine in _engines(model):
        for temperature in (1.0, 0.0):
            with pytest.raises(ModelError, match=r"NaN/inf logits at row 1, step 0"):
                engine.generate(prompts, SamplingParams(temperature=temperature, max_new_tokens=4, seed=0))


@pytest.mark.parametrize("completion,shown", [([[16]], "16"), ([[-1]], "-1"), ([[1.0]], "1.0"), ([[True]], "True"),
                                              ([[2], ["3"]], "'3'")])
def test_token_logprobs_validates_completion_ids(target, completion, shown):
    engine = Engine(target)
    prompts = [[1, 2]] * len(completion)
    with pytest.raises(InputError, match=f"got {shown}") as err:
        engine.token_logprobs(prompts, completion)
    assert err.value.field == "completion_ids" and err.value.row == len(completion) - 1


def test_numpy_and_torch_ids_are_accepted(target):
    engine = Engine(target)
    params = SamplingParams(temperature=1.0, max_new_tokens=6, seed=4)
    reference = [c.token_ids for c in engine.generate(PROMPTS, params)]
    for prompts in ([np.array(p) for p in PROMPTS], [[np.int64(t) for t in p] for p in PROMPTS],
                    [torch.tensor(p) for p in PROMPTS], np.array([PROMPTS[0]])):
        out = [c.token_ids for c in engine.generate(prompts, params)]
        assert out == reference[:len(out)]
    lp = engine.token_logprobs(np.array([[1, 2]]), np.array([[3, 4]]))
    assert lp == engine.token_logprobs([[1, 2]], [[3, 4]])


def test_flat_list_says_what_to_pass(target):
    with pytest.raises(InputError, match="a list of prompts, each a list of ids"):
        Engine(target).generate([1, 2, 3])


def test_params_none_means_defaults(target):
    model = target_model(TinySpec(vocab_size=16, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2,
                                  intermediate_size=64, max_positions=128), seed=11)
    out = Engine(model).generate([[1, 2]], None)
    assert len(out[0].token_ids) == SamplingParams().max_new_tokens  # no stop token: the default budget


def test_running_past_the_positions_is_a_clear_error(target):
    engine = Engine(target)
    with pytest.raises(ConfigError, match="row 1: prompt \\+ max_new_tokens is 36 tokens, past the model's 32"):
        engine.generate([[1], list(range(6))], SamplingParams(max_new_tokens=30))
    with pytest.raises(ConfigError, match="past the model's 32"):
        engine.token_logprobs([[1] * 20], [[2] * 13])
    assert len(engine.generate([[1, 2]], SamplingParams(max_new_tokens=30, seed=0))[0].token_ids) == 30
