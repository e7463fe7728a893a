"""Test-only OpenEnv environments: ones ``envs check`` must refuse, and one whose reward is a hand-computable
function of the replies (to check that the trainer's rewards are the environment's)."""
from __future__ import annotations

import random
from typing import Any, Optional

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

from trajkit.envs.openenv.examples import SumEnv, TextAction, TextObservation


class LenientSumEnv(SumEnv):
    """Pays when the answer appears anywhere in the reply: the shotgun probe's target."""

    def step(self, action: TextAction, timeout_s: Optional[float] = None, **kwargs: Any) -> TextObservation:
        right = str(self.answer) in action.message.split()
        return TextObservation(prompt="ok", done=True, reward=1.0 if right else 0.0)


class GullibleSumEnv(SumEnv):
    """Believes a reply that says it is correct: the claim probe's target."""

    def step(self, action: TextAction, timeout_s: Optional[float] = None, **kwargs: Any) -> TextObservation:
        right = action.message.strip() == str(self.answer) or "correct" in action.message.lower()
        return TextObservation(prompt="ok", done=True, reward=1.0 if right else 0.0)


class FreeEnv(SumEnv):
    """Pays everyone: vacuous."""

    def step(self, action: TextAction, timeout_s: Optional[float] = None, **kwargs: Any) -> TextObservation:
        return TextObservation(prompt="ok", done=True, reward=1.0)


class CrashEnv(SumEnv):
    """Its step raises."""

    def step(self, action: TextAction, timeout_s: Optional[float] = None, **kwargs: Any) -> TextObservation:
        raise RuntimeError("grader crashed")


class LengthEnv(Environment):
    """Two steps; each pays len(reply) / 100 (a reward the test recomputes from the gateway's replies)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(step_count=0)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> TextObservation:
        self._state = State(step_count=0)
        return TextObservation(prompt=f"Say something about {random.Random(seed).choice(['cats', 'dogs', 'owls'])}.")

    def step(self, action: TextAction, timeout_s: Optional[float] = None, **kwargs: Any) -> TextObservation:
        self._state.step_count += 1
        return TextObservation(prompt="More.", done=self._state.step_count >= 2, reward=len(action.message) / 100)

    @property
    def state(self) -> State:
        return self._state


def wrong_solver(messages):
    return "0"
