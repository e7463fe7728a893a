"""The single-turn kind: tasks with verifiable rewards whose episode is one generate call.

The :class:`~trajkit.envs.base.Task` and :class:`~trajkit.envs.base.Environment` protocols and the
:class:`~trajkit.envs.base.Prompt` record are in :mod:`trajkit.envs.base`. Here:

- :class:`SingleTurnEnv`: one generate call per prompt, every completion token sampled;
- token ids come from the policy's Hugging Face tokenizer (the tiny policies use the byte tokenizer of
  :mod:`trajkit.models.tokenizer`); generation stops on the tokenizer's end-of-turn/eos ids
  (:func:`trajkit.models.chat.stop_token_ids`);
- rewards (:func:`exact_match`, :func:`final_number_correct`) are TRL-style callables
  (:mod:`trajkit.envs.rewards`); a task names its default ``reward_funcs`` and a run can replace them
  (``rewards:`` in a config, ``reward_funcs=`` in :class:`trajkit.rl.Trainer`).

Shipped toy task, ``StringTask`` (plain text, no chat template): ``"<op> <word>="`` -> the transformed
word, e.g. ``"rev abc=" -> "cba"``; ops are ``copy``, ``rev``, ``sort``, ``add`` (``"12+7=" -> "19"``) and
``rep`` (``"c*5=" -> "ccccc"``: repeat a letter n times, ``min_len <= n <= max_len``; the demo's task,
because a tiny byte-level model learns its format in seconds but counting long runs exactly at
temperature 1 is what RL has to sharpen). The checker is exact string equality of the completion
(without its end-of-turn token) with the ``answer`` column. ``ChatArithmeticTask``: a chat question "What is
a + b?", rewarded by the reply's last number.
"""
from __future__ import annotations

import re
import zlib
from typing import Callable, Sequence

from trajkit.engine import SamplingParams
from trajkit.errors import ConfigError
from trajkit.models.chat import render, stop_token_ids
from trajkit.envs.base import ENDLESS
from trajkit.envs.base import Environment, Generate, Prompt, Task, completion_text, encode, rng_for  # noqa: F401
from trajkit.envs.rewards import completion_content
from trajkit.envs.sample import Sample

# Environment, Task, Prompt, Generate, rng_for, encode and completion_text were defined here before
# trajkit.envs.base; importing them from this module keeps working.


def exact_match(completions, answer, **kwargs) -> list[float]:
    """1.0 when the completion's text equals the ``answer`` column, else 0.0."""
    return [float(completion_content(c) == a) for c, a in zip(completions, answer)]


def reward_metadata(prompt: Prompt, completion_text_: str) -> dict:
    """What the rewards read from a single-turn sample: the prompt, the completion (as a message when the
    prompt is a conversation) and the row's columns."""
    source = prompt.source if prompt.source is not None else prompt.text
    completion = [{"role": "assistant", "content": completion_text_}] if prompt.conversational \
        else completion_text_
    return {"prompt": source, "completion": completion, "columns": prompt.columns}


OPS: dict[str, Callable[[str], str]] = {"copy": lambda w: w, "rev": lambda w: w[::-1],
                                        "sort": lambda w: "".join(sorted(w))}


class SingleTurnEnv:
    """One generate call per prompt; every completion token is sampled (``loss_mask`` 1). It keeps no state
    between calls, so two batches may run it at once (``concurrent_rollouts``: :mod:`trajkit.rl.producer`)."""

    concurrent_rollouts = True

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def rollout(self, generate: Generate, prompts: Sequence[Prompt], params: SamplingParams) -> list[Sample]:
        outs = generate([p.ids for p in prompts], params)
        return [Sample(list(p.ids), list(c.token_ids), list(c.logprobs), [1] * len(c.token_ids),
                       {**reward_metadata(p, completion_text(self.tokenizer, c.token_ids)),
                        "prompt_index": p.index, "finish_reason": c.finish_reason,
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
        self.env = SingleTurnEnv(tokenizer)
        self.reward_funcs = [exact_match]

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
        return Prompt(text, encode(self.tokenizer, text), index, {"answer": answer})

    def demonstration(self, prompt: Prompt) -> Sample:
        """The correct episode (answer + end of turn, all model tokens), to warm-start a policy by SFT."""
        ids = encode(self.tokenizer, prompt.answer) + [stop_token_ids(self.tokenizer)[0]]
        return Sample(list(prompt.ids), ids, [0.0] * len(ids), [1] * len(ids), reward_metadata(prompt, prompt.answer))


def last_number(text: str) -> str | None:
    """The last integer written in ``text`` (``"3 + 4 = 7."`` -> ``"7"``), or None."""
    found = re.findall(r"-?\d+", text.replace(",", ""))
    return found[-1] if found else None


def final_number_correct(completions, answer, **kwargs) -> list[float]:
    """1.0 when the last integer in the completion equals the ``answer`` column, else 0.0."""
    return [float(last_number(completion_content(c)) == str(a)) for c, a in zip(completions, answer)]


QUESTIONS = {  # ChatArithmeticTask's question per style; {a}, {b} the operands
    "short": "What is {a} + {b}? Answer with only the number.",
    "explain": "What is {a} + {b}? Explain how you add them step by step, then end with the number.",
}


class ChatArithmeticTask:
    """A chat question "What is a + b? Answer with only the number." (``a, b`` in ``[min_len, max_len]``),
    rendered by the policy's chat template; reward: the last number of the reply is the sum.

    ``style="explain"`` (task ``arith_explain``) asks for a step-by-step explanation that ends with the
    number instead (:data:`QUESTIONS`): the same pairs, split and reward, but the base model's replies are
    ~110 tokens, so that generation is a large share of the RL step (the speculative-rollout benchmark's
    variant; the reward reads only the last number, so RL shortens them again, docs/rl.md).

    Made for a real small instruct model (SmolLM2-135M-Instruct) to learn on a CPU in minutes: it answers
    correctly at temperature 0.7 about a third of the time (docs/rl.md has the measurement), so most
    groups of 8 hold both outcomes, and the failures are mostly rambling (restating, inventing steps)
    that RL can remove. The ``(a, b)`` pairs are split between train and eval by a fixed hash, so the
    held-out questions never appear in training."""

    name = "arith"
    EVAL_SHARE = 4  # one pair in four is held out

    def __init__(self, seed: int, tokenizer, low: int = 1, high: int = 9, style: str = "short"):
        if style not in QUESTIONS:
            raise ConfigError(f"task arith: style must be one of {sorted(QUESTIONS)}, got {style!r}")
        if high - low < 2:
            raise ConfigError(f"task arith needs max_len - min_len >= 2 (operands in [min_len, max_len]), "
                              f"got [{low}, {high}]")
        self.seed, self.tokenizer, self.question = seed, tokenizer, QUESTIONS[style]
        self.name = "arith" if style == "short" else f"arith_{style}"
        pairs = [(a, b) for a in range(low, high + 1) for b in range(low, high + 1)]
        self.splits = {"eval": [p for p in pairs if _held_out(p, self.EVAL_SHARE)]}
        self.splits["train"] = [p for p in pairs if not _held_out(p, self.EVAL_SHARE)]
        self.env = SingleTurnEnv(tokenizer)
        self.reward_funcs = [final_number_correct]

    def prompt(self, index: int, split: str = "train") -> Prompt:
        pairs = self.splits["eval" if split == "eval" else "train"]
        if split == "eval":
            a, b = pairs[index % len(pairs)]
        else:
            a, b = rng_for(self.seed, index, split).choice(pairs)
        messages = [{"role": "user", "content": self.question.format(a=a, b=b)}]
        text = render(self.tokenizer, messages, add_generation_prompt=True)
        return Prompt(text, encode(self.tokenizer, text), index, {"answer": str(a + b)}, source=messages)

    def num_prompts(self, split: str) -> int:
        return len(self.splits["eval"]) if split == "eval" else ENDLESS


def _held_out(pair: tuple[int, int], share: int) -> bool:
    return zlib.crc32(f"{pair[0]}+{pair[1]}".encode()) % share == 0
