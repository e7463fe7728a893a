"""The environment modules moved from ``trajkit.rl`` (and ``traces.atomic`` to the ground floor, the SFT export
to ``traces/export/``, the SFT trainer to ``trainers/``): importing an old path fails with one message naming
the new module, in code and in a config's import path alike; the public names users import from their new
homes (and ``trajkit.rl.Sample``, a package export) resolve."""
import importlib

import pytest

from trajkit.envs.imports import import_object
from trajkit.errors import ConfigError

MOVED = {"trajkit.rl.tasks": "trajkit.envs.single_turn", "trajkit.rl.toolenv": "trajkit.envs.toolenv",
         "trajkit.rl.sandbox": "trajkit.envs.calculator", "trajkit.rl.agent": "trajkit.envs.agent",
         "trajkit.rl.data": "trajkit.envs.data", "trajkit.rl.registry": "trajkit.envs.registry",
         "trajkit.rl.sample": "trajkit.envs.sample", "trajkit.rl.rewards": "trajkit.envs.rewards",
         "trajkit.rl.imports": "trajkit.envs.imports", "trajkit.traces.atomic": "trajkit.atomic",
         # issue 45: the SFT export in its own folder, the SFT trainer and its phases in the trainers layer
         **{f"trajkit.traces.{m}": f"trajkit.traces.export.{m}" for m in (
             "tokenize", "windowing", "token_export", "token_records", "template_probe", "source_check", "sft",
             "sft_render")},
         "trajkit.envs.harbor.sft": "trajkit.trainers.sft", "trajkit.envs.harbor.stages": "trajkit.trainers.phases"}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_fails_naming_the_new_module(old):
    with pytest.raises(ModuleNotFoundError) as err:
        importlib.import_module(old)
    assert str(err.value).startswith(f"{old} moved to {MOVED[old]}: import {MOVED[old]} instead")
    assert importlib.import_module(MOVED[old]).__name__ == MOVED[old]


def test_a_config_import_path_through_an_old_module_names_the_new_one():
    with pytest.raises(ConfigError, match=r"rewards\[0\].*trajkit\.rl\.tasks moved to trajkit\.envs\.single_turn"):
        import_object("trajkit.rl.tasks:exact_match", "rewards[0]")
    assert import_object("trajkit.envs.single_turn:exact_match", "rewards[0]").__name__ == "exact_match"


def test_a_config_import_path_through_the_old_export_module_names_the_new_one():
    with pytest.raises(ConfigError, match=r"trajkit\.traces\.tokenize moved to trajkit\.traces\.export\.tokenize"):
        import_object("trajkit.traces.tokenize:TokenizeConfig", "tokenize")


def test_the_public_names_users_import_still_resolve():
    from trajkit.envs import base, single_turn
    from trajkit.envs.calculator import CalculatorError, SandboxError, evaluate
    from trajkit.envs.sample import Sample
    from trajkit.models.fit import next_token_loss_at
    from trajkit.recipes.scripted import reply_loss
    from trajkit.rl import Sample as RlSample

    assert RlSample is Sample
    assert reply_loss is next_token_loss_at  # the recipe's name for the loss it moved to models/fit.py
    for name in ("Task", "Environment", "Prompt", "Generate", "rng_for", "encode", "completion_text"):
        assert getattr(single_turn, name) is getattr(base, name)  # envs/base.py's names, as imported before
    assert SandboxError is CalculatorError
    assert evaluate("2 ** 100") == "error: exponent 100 too large (limit 64)"  # a CalculatorError, reported
