"""Bad parameters raise one ConfigError / InputError that names the parameter."""
from __future__ import annotations

import pytest
import torch

from trajkit.engine import DraftModel, Engine, NgramDrafter, SamplingParams
from trajkit.errors import ConfigError, InputError
from trajkit.models.spec import TinySpec, build_model

SPEC = TinySpec(vocab_size=16, hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=32)


@pytest.mark.parametrize("kwargs,name", [
    ({"temperature": -0.1}, "temperature"),
    ({"temperature": float("nan")}, "temperature"),
    ({"top_p": 0.0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_k": -1}, "top_k"),
    ({"top_k": 2.5}, "top_k"),
    ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"stop_token_ids": [-3]}, "stop_token_ids"),
    ({"seed": -1}, "seed"),
])
def test_sampling_params_errors(kwargs, name):
    with pytest.raises(ConfigError, match=name):
        SamplingParams(**kwargs)


@pytest.mark.parametrize("k", [0, -1, 1.5, "fast", True])
def test_num_draft_tokens_errors(k):
    model = build_model(SPEC, 0)
    with pytest.raises(ConfigError, match="num_draft_tokens"):
        Engine(model, NgramDrafter(), num_draft_tokens=k)


def test_draft_with_other_vocabulary():
    target = build_model(SPEC, 0)
    other = build_model(TinySpec(vocab_size=20, hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=1,
                                 intermediate_size=32), 1)
    with pytest.raises(ConfigError, match="drafter"):
        Engine(target, DraftModel(other))


def test_ngram_sizes():
    with pytest.raises(ConfigError, match="min_ngram"):
        NgramDrafter(min_ngram=0)
    with pytest.raises(ConfigError, match="max_ngram"):
        NgramDrafter(max_ngram=1, min_ngram=2)


def test_bad_inputs():
    engine = Engine(build_model(SPEC, 0))
    with pytest.raises(InputError, match="prompt_ids"):
        engine.generate([], SamplingParams())
    with pytest.raises(InputError, match=r"row 1: field prompt_ids"):
        engine.generate([[1], []], SamplingParams())
    with pytest.raises(InputError, match=r"\[0, 16\)"):
        engine.generate([[1, 16]], SamplingParams())
    with pytest.raises(ConfigError, match="stop_token_ids"):
        engine.generate([[1]], SamplingParams(stop_token_ids=[99]))
    with pytest.raises(ConfigError, match="params"):
        engine.generate([[1], [2]], [SamplingParams()])
    with pytest.raises(ConfigError, match="drafter"):
        Engine(build_model(SPEC, 0), drafter=object())


def test_update_weights_errors():
    engine = Engine(build_model(SPEC, 0))
    with pytest.raises(ConfigError, match="state_dict"):
        engine.update_weights({"nope": torch.zeros(1)})
    bad = {k: torch.zeros(1) for k in engine.model.state_dict()}
    with pytest.raises(ConfigError, match="state_dict"):
        engine.update_weights(bad)
