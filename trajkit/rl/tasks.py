"""Tasks with verifiable rewards, and the environments that turn prompts into ``Sample``s.

Three small pieces, all plain:

- a **reward** is any callable ``(samples) -> list[float]`` (``Reward``); rewards read the decoded
  completion and ``sample.metadata["answer"]``;
- token ids come from the policy's Hugging Face tokenizer (the tiny policies use the byte tokenizer of
  :mod:`trajkit.models.tokenizer`); the end-of-turn id is ``tokenizer.eos_token_id``;
- an **environment** (``Environment`` Protocol) runs episodes: given the engine's ``generate`` and a
  batch of prompts it returns one :class:`Sample` per prompt. :class:`SingleTurnEnv` makes one generate
  call; the Hermes tool-use environment (:mod:`trajkit.rl.toolenv`) loops over turns;
- a **task** (``Task`` Protocol) makes prompt ``i`` deterministically from ``(seed, i)`` and names its
  environment and reward. The prompt stream's state is therefore one integer (the cursor).

Shipped single-turn task, ``StringTask``: ``"<op> <word>="`` -> the transformed word, e.g.
``"rev abc=" -> "cba"``; ops are ``copy``, ``rev``, ``sort``, ``add`` (``"12+7=" -> "19"``) and ``rep``
(``"c*5=" -> "ccccc"``: repeat a letter n times, ``min_len <= n <= max_len``; the example config's task,
because a tiny byte-level model learns its format in seconds but counting long runs exactly at
temperature 1 is what RL has to sharpen). The checker is exact string equality of the completion
(without its end-of-turn token) with the answer.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from trajkit.engine import SamplingParams
from trajkit.errors import ConfigError
from trajkit.rl.sample import Sample

Reward = Callable[[Sequence[Sample]], list[float]]
Generate = Callable[[list[list[int]], SamplingParams], Sequence[Any]]  # Engine.generate


@dataclass
class Prompt:
    """One task instance: ``ids`` to condition on, the expected ``answer``, and its stream ``index``."""

    text: str
    ids: list[int]
    answer: str
    index: int
    meta: dict = field(default_factory=dict)


class Environment(Protocol):
    def rollout(self, generate: Generate, prompts: Sequence[Prompt], params: SamplingParams) -> list[Sample]:
        """One finished episode per prompt, in order."""


class Task(Protocol):
    name: str
    env: Environment
    reward: Reward

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
    """The decoded completion without its final end-of-turn token."""
    ids = list(ids)
    if ids and ids[-1] == tokenizer.eos_token_id:
        ids = ids[:-1]
    return tokenizer.decode(ids)


def exact_match_reward(tokenizer) -> Reward:
    """1.0 when the completion (end-of-turn token stripped) decodes to ``metadata["answer"]``, else 0.0."""
    def reward(samples: Sequence[Sample]) -> list[float]:
        return [float(completion_text(tokenizer, s.completion_ids) == s.metadata["answer"]) for s in samples]
    return reward


OPS: dict[str, Callable[[str], str]] = {"copy": lambda w: w, "rev": lambda w: w[::-1],
                                        "sort": lambda w: "".join(sorted(w))}


class SingleTurnEnv:
    """One generate call per prompt; every completion token is sampled (``loss_mask`` 1)."""

    def rollout(self, generate: Generate, prompts: Sequence[Prompt], params: SamplingParams) -> list[Sample]:
        outs = generate([p.ids for p in prompts], params)
        return [Sample(list(p.ids), list(c.token_ids), list(c.logprobs), [1] * len(c.token_ids),
                       {"answer": p.answer, "prompt_index": p.index, "finish_reason": c.finish_reason,
                        "draft_proposed": c.draft_proposed, "draft_accepted": c.draft_accepted})
                for p, c in zip(prompts, outs)]


class StringTask:
    """``"<op> <word>="`` -> ``OPS[op](word)``; words of ``min_len..max_len`` letters from ``alphabet``."""

    def __init__(self, op: str, seed: int, tokenizer, min_len: int = 4, max_len: int = 8,
                 alphabet: str = "abcdefgh"):
        if op not in ("add", "rep") and op not in OPS:
            raise ConfigError(f"task op must be one of {sorted(OPS) + ['add', 'rep']}, got {op!r}")
        self.name, self.op, self.seed = op, op, seed
        self.min_len, self.max_len, self.alphabet = min_len, max_len, alphabet
        self.tokenizer = tokenizer
        self.env = SingleTurnEnv()
        self.reward = exact_match_reward(tokenizer)

    def prompt(self, index: int, split: str = "train") -> Prompt:
        rng = rng_for(self.seed, index, split)
        if self.op == "add":
            a, b = rng.randrange(10 ** self.max_len), rng.randrange(10 ** self.max_len)
            text, answer = f"{a}+{b}=", str(a + b)
        elif self.op == "rep":
            letter, n = rng.choice(self.alphabet), rng.randint(self.min_len, self.max_len)
            text, answer = f"{letter}*{n}=", letter * n
        else:
            word = "".join(rng.choice(self.alphabet) for _ in range(rng.randint(self.min_len, self.max_len)))
            text, answer = f"{self.op} {word}=", OPS[self.op](word)
        return Prompt(text, encode(self.tokenizer, text), answer, index)

    def demonstration(self, prompt: Prompt) -> Sample:
        """The correct episode (answer + end of turn, all model tokens), to warm-start a policy by SFT."""
        ids = encode(self.tokenizer, prompt.answer) + [self.tokenizer.eos_token_id]
        return Sample(list(prompt.ids), ids, [0.0] * len(ids), [1] * len(ids), {"answer": prompt.answer})
