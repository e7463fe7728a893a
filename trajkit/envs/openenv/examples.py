"""Two small OpenEnv environments (real ``openenv.core`` classes), offline, with their reference policies.

- :class:`SumEnv` (single step): "What is A + B?" with ``A, B`` drawn from the seed; reward 1 when the last
  integer in the reply is the sum (``4 + 2 = 6`` earns it, ``6 or 7`` does not), else 0; done after one step.
- :class:`GuessEnv` (multi-step): a secret number from 1 to 8 drawn from the seed; each reply is one guess,
  answered "higher"/"lower"; reward 1 on the step that guesses it, done then or after ``MAX_GUESSES`` guesses.
  A reply that is not exactly one number is a wasted guess (feedback says so).

``sum_solver`` and ``guess_solver`` (a binary search over the feedback) are their scripted reference
policies for ``trajkit envs check``; ``nop`` replies nothing. Neither pays for the answer merely appearing
in the reply, so a reply listing many numbers earns nothing (the ``shotgun`` probe).

    trajkit train grpo_smollm2 task.name=openenv task.openenv.env=trajkit.envs.openenv.examples:SumEnv
    trajkit envs check --openenv trajkit.envs.openenv.examples:GuessEnv \\
        --reference trajkit.envs.openenv.examples:guess_solver
"""
from __future__ import annotations

import random
import re
from typing import Any, Optional

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

from trajkit.envs.openenv.episode import nop  # noqa: F401 - the NOP policy beside the reference ones

NUMBER = re.compile(r"\s*(-?\d+)\s*\.?\s*")
INTEGER = re.compile(r"-?\d+")
MAX_GUESSES = 4
HIGH = 8


class TextAction(Action):
    """The model's reply."""

    message: str


class TextObservation(Observation):
    """What the model is told."""

    prompt: str


def _number(text: str) -> int | None:
    m = NUMBER.fullmatch(text)
    return int(m.group(1)) if m else None


class SumEnv(Environment):
    """Single step: add two one-digit numbers (module docstring)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(step_count=0)
        self.answer = 0

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> TextObservation:
        rng = random.Random(seed)
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        self.answer = a + b
        self._state = State(episode_id=episode_id, step_count=0)
        return TextObservation(prompt=f"What is {a} + {b}? Reply with the number only.")

    def step(self, action: TextAction, timeout_s: Optional[float] = None, **kwargs: Any) -> TextObservation:
        self._state.step_count += 1
        found = INTEGER.findall(action.message)
        right = bool(found) and int(found[-1]) == self.answer
        return TextObservation(prompt="Correct." if right else "Wrong.", done=True, reward=1.0 if right else 0.0)

    @property
    def state(self) -> State:
        return self._state


class GuessEnv(Environment):
    """Several steps: find a secret number from 1 to 8 from "higher"/"lower" answers (module docstring)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(step_count=0)
        self.secret = 1

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> TextObservation:
        self.secret = random.Random(seed).randint(1, HIGH)
        self._state = State(episode_id=episode_id, step_count=0)
        return TextObservation(prompt=f"I am thinking of a number from 1 to {HIGH}. You have {MAX_GUESSES} guesses. "
                                      "Reply with one number.")

    def step(self, action: TextAction, timeout_s: Optional[float] = None, **kwargs: Any) -> TextObservation:
        self._state.step_count += 1
        guess = _number(action.message)
        out_of_guesses = self._state.step_count >= MAX_GUESSES
        if guess == self.secret:
            return TextObservation(prompt="Correct!", done=True, reward=1.0)
        if guess is None:
            feedback = f"Reply with one number from 1 to {HIGH}."
        else:
            feedback = "Higher." if guess < self.secret else "Lower."
        return TextObservation(prompt=feedback, done=out_of_guesses, reward=0.0)

    @property
    def state(self) -> State:
        return self._state


def sum_solver(messages: list[dict[str, str]]) -> str:
    """The reference policy of :class:`SumEnv`: reads the two numbers and adds them."""
    a, b = map(int, re.findall(r"-?\d+", messages[-1]["content"])[:2])
    return str(a + b)


def guess_solver(messages: list[dict[str, str]]) -> str:
    """The reference policy of :class:`GuessEnv`: binary search over the feedback so far."""
    low, high = 1, HIGH
    replies = [m["content"] for m in messages if m["role"] == "assistant"]
    feedback = [m["content"] for m in messages if m["role"] == "user"][1:]
    for guess, said in zip(replies, feedback):
        if said.startswith("Higher"):
            low = int(guess) + 1
        elif said.startswith("Lower"):
            high = int(guess) - 1
    return str((low + high) // 2)
