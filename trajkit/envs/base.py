"""The two protocols every environment of trajkit implements, and the prompt record they share.

- a **task** (:class:`Task`) makes prompt ``i`` deterministically from ``(seed, i)`` (:func:`rng_for`) and names
  its environment and its default rewards (``reward_funcs``: TRL-style callables ``(prompts, completions,
  completion_ids, **columns) -> list[float | None]``, :mod:`trajkit.envs.rewards`). The prompt stream's state is
  therefore one integer (the cursor);
- an **environment** (:class:`Environment`) runs episodes: given the generation callable (``Engine.generate``'s
  shape, :data:`Generate`) and a batch of :class:`Prompt` it returns one :class:`~trajkit.envs.sample.Sample`
  per prompt, in order, with ``metadata["prompt"]``, ``metadata["completion"]`` and ``metadata["columns"]`` for
  the rewards.

Example: the single-turn kinds (:mod:`trajkit.envs.single_turn`: one generate call per prompt), the Hermes
tool-use env (:mod:`trajkit.envs.toolenv`: a loop over turns), the agent env (:mod:`trajkit.envs.agent`: an
external harness through a gateway); a dataset with a ``prompt`` column is a task too (:mod:`trajkit.envs.data`).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from trajkit.engine import SamplingParams
from trajkit.models.chat import stop_token_ids
from trajkit.envs.sample import Sample

Generate = Callable[[list[list[int]], SamplingParams], Sequence[Any]]  # Engine.generate
ENDLESS = 10 ** 9  # num_prompts("train") of a task whose train stream has no end (seeded draws)


@dataclass
class Prompt:
    """One task instance: ``ids`` to condition on (``text`` rendered), its stream ``index``, the ``source``
    the rewards see as ``prompts[i]`` (chat messages or text; ``text`` when None), and the row's
    ``columns`` (passed to rewards as keyword lists: ``answer``, ``solution``, ...)."""

    text: str
    ids: list[int]
    index: int
    columns: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    source: str | list[dict] | None = None

    @property
    def answer(self):
        """The ``answer`` column (None when the row has none)."""
        return self.columns.get("answer")

    @answer.setter
    def answer(self, value) -> None:
        self.columns["answer"] = value

    @property
    def conversational(self) -> bool:
        return isinstance(self.source, list)


class Environment(Protocol):
    def rollout(self, generate: Generate, prompts: Sequence[Prompt], params: SamplingParams) -> list[Sample]:
        """One finished episode per prompt, in order."""


class Task(Protocol):
    name: str
    env: Environment
    reward_funcs: list  # TRL-style reward functions (trajkit.envs.rewards)

    def prompt(self, index: int, split: str = "train") -> Prompt:
        """Prompt ``index`` of ``split`` ("train" or "eval"; disjoint random streams)."""


def rng_for(seed: int, index: int, split: str) -> random.Random:
    """The random stream of prompt ``index``: a pure function of (seed, index, split). The ``eval`` split
    ignores the run seed, so runs with different seeds are evaluated on the same prompts."""
    return random.Random(f"{split}:{0 if split == 'eval' else seed}:{index}")


def encode(tokenizer, text: str) -> list[int]:
    """``text`` as token ids, without BOS/EOS added by the tokenizer."""
    return tokenizer.encode(text, add_special_tokens=False)


def completion_text(tokenizer, ids: Sequence[int]) -> str:
    """The decoded completion without its final end-of-turn token (and without special tokens)."""
    ids = list(ids)
    if ids and ids[-1] in stop_token_ids(tokenizer):
        ids = ids[:-1]
    return tokenizer.decode(ids, skip_special_tokens=True)
