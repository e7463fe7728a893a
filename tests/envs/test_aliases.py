"""The environment modules moved from ``trajkit.rl`` (and ``traces.atomic`` to the ground floor); the old import
paths are aliases of the new modules (the same module object: patching one patches the other), so code written
against them keeps working unchanged."""
import importlib

import pytest

MOVED = {"trajkit.rl.tasks": "trajkit.envs.single_turn", "trajkit.rl.toolenv": "trajkit.envs.toolenv",
         "trajkit.rl.sandbox": "trajkit.envs.calculator", "trajkit.rl.agent": "trajkit.envs.agent",
         "trajkit.rl.data": "trajkit.envs.data", "trajkit.rl.registry": "trajkit.envs.registry",
         "trajkit.rl.sample": "trajkit.envs.sample", "trajkit.rl.rewards": "trajkit.envs.rewards",
         "trajkit.rl.imports": "trajkit.envs.imports", "trajkit.traces.atomic": "trajkit.atomic"}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_new_module(old):
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


def test_the_public_names_users_import_still_resolve():
    from trajkit.envs.calculator import CalculatorError, evaluate
    from trajkit.envs.sample import Sample
    from trajkit.rl import Sample as RlSample
    from trajkit.rl.sandbox import SandboxError
    from trajkit.rl.tasks import Prompt, SingleTurnEnv, Task  # noqa: F401

    assert RlSample is Sample
    assert SandboxError is CalculatorError
    assert evaluate("2 ** 100") == "error: exponent 100 too large (limit 64)"  # a CalculatorError, reported
