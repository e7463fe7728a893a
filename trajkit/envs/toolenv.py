"""Multi-turn tool use in the Hermes format: the model calls a calculator, the environment answers.

An episode is a chat conversation rendered by the policy tokenizer's own chat template
(:mod:`trajkit.models.chat`; nothing here writes ChatML by hand). The prompt is the render of a system
message, the calculator's schema as ``tools`` (a tool-calling template lists it in the system turn inside
``<tools></tools>``, as Hermes function-calling prompts do) and the user's question, with the generation
prompt on. A template without tool support (SmolLM2's plain ChatML drops ``tools``) gets the same
conversation written inline, as the Hermes traces are: the ``<tools>`` block in the system message and
the results as ``<tool_response>`` text (:class:`ToolFormat`, chosen by the template probe that the SFT
export uses). Then, turn by turn:

1. the engine samples the assistant message up to the end-of-turn token (``loss_mask`` 1, engine
   log-probs);
2. its ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks are parsed with trajkit's
   Hermes parser (:func:`trajkit.traces.blocks.parse_assistant`) and executed by the calculator
   (:mod:`trajkit.envs.calculator`, with a time limit);
3. the results come back as ``tool`` messages; the text the template adds for them after the assistant's
   end-of-turn token, through the opening of the next assistant turn (:func:`trajkit.models.chat.continuation`),
   is *forced* (``loss_mask`` 0, logprob 0.0). The template must be append-only over that step.

The episode ends on an assistant message without a tool call (its text is the final answer), when a
turn stops on the token budget instead of ``<|im_end|>``, or after ``max_turns`` assistant turns. The
reward is exact match of the final answer with the true value. ``to_hermes_row`` writes an episode as a
Hermes ShareGPT row that ``trajkit traces stats`` reads.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Sequence

from trajkit.engine import SamplingParams
from trajkit.models.chat import continuation, render
from trajkit.envs.sample import Sample
from trajkit.envs.calculator import evaluate
from trajkit.envs.base import Generate, Prompt, completion_text, encode, rng_for
from trajkit.traces.blocks import parse_assistant
from trajkit.traces.hermes_text import tool_turn
from trajkit.traces.export.template_probe import (
    choose_rendering,
    hermes_tools_system,
    probe_template,
)

CALCULATOR = {"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"]}}}
INSTRUCTION = "You may call tools."
SYSTEM = INSTRUCTION + "\n<tools>\n" + json.dumps(CALCULATOR) + "\n</tools>"  # as a Hermes trace has it


@dataclass
class Episode:
    """Growing state of one episode: tokens after the prompt, their mask/logprobs, and the messages."""

    prompt: Prompt
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)  # the policy version of each token (-1: forced)
    messages: list[dict] = field(default_factory=list)  # Hermes ``{from, value}`` turns
    chat: list[dict] = field(default_factory=list)  # the same conversation as chat messages
    turns: int = 0
    tool_calls: int = 0
    done: bool = False
    finish: str = ""

    def add(self, ids: list[int], logprobs: list[float] | None, version: int = -1) -> None:
        self.ids += ids
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)
        self.mask += [1 if logprobs is not None else 0] * len(ids)
        self.versions += [version if logprobs is not None else -1] * len(ids)


def run_calls(text: str, timeout_s: float) -> list[dict] | None:
    """Execute the tool calls in an assistant message -> tool results, or None when it has no call."""
    _, calls = parse_assistant(text, 0, [])
    if not calls:
        return None
    results = []
    for call in calls:
        if call.error or call.name != "calculator":
            content = f"error: {call.error or 'unknown tool ' + repr(call.name)}"
        else:
            content = evaluate(str((call.arguments or {}).get("expression", "")), timeout_s)
        results.append({"name": call.name or "", "content": content})
    return results


@dataclass(frozen=True)
class ToolFormat:
    """How the policy's chat template carries the tool turns (chosen once by the template probe of
    :mod:`trajkit.traces.export.template_probe`): ``structured`` passes ``tools`` and ``tool`` messages to the
    template; ``inline`` (a template without tool support, e.g. SmolLM2's plain ChatML) writes the Hermes
    ``<tools>`` system block and ``<tool_response>`` text in ``tool_role`` (``tool``, else ``user``)."""

    mode: str = "structured"
    tool_role: str = "tool"

    @property
    def tools(self) -> list[dict] | None:
        return [CALCULATOR] if self.mode == "structured" else None

    def start_chat(self, question: str) -> list[dict]:
        system = INSTRUCTION if self.mode == "structured" else hermes_tools_system([CALCULATOR], INSTRUCTION)
        return [{"role": "system", "content": system}, {"role": "user", "content": question}]

    def tool_messages(self, results: list[dict]) -> list[dict]:
        """Tool results as chat messages (a structured template wraps each in ``<tool_response>`` itself)."""
        if self.mode == "structured":
            return [{"role": "tool", "content": json.dumps(r)} for r in results]
        return [{"role": self.tool_role, "content": hermes_tool_value(results)}]


def tool_format(tokenizer) -> ToolFormat:
    """The :class:`ToolFormat` the template probe chooses for ``tokenizer``."""
    rendering = choose_rendering(probe_template(tokenizer))
    return ToolFormat(rendering.mode, rendering.tool_role)


def hermes_tool_value(results: list[dict]) -> str:
    """Tool results as the ``value`` of a Hermes ``tool`` turn (one ``{"name", "content"}`` block each; the
    calculator's calls carry no ids)."""
    return tool_turn([json.dumps(r) for r in results])


def forced_text(tokenizer, chat: list[dict], results: list[dict], fmt: ToolFormat = ToolFormat()) -> str:
    """Text after the last assistant message's end-of-turn token: template glue, the tool turn, and the
    opening of the next assistant turn."""
    return continuation(tokenizer, chat, fmt.tool_messages(results), fmt.tools, add_generation_prompt=True,
                        after_end_of_turn=True)


class ToolEnv:
    """Batched Hermes tool-use episodes over the engine; see the module docstring. No state between calls:
    two batches may run it at once (``concurrent_rollouts``: :mod:`trajkit.rl.producer`)."""

    concurrent_rollouts = True

    def __init__(self, tokenizer, max_turns: int = 3, timeout_s: float = 0.5, fmt: ToolFormat | None = None):
        self.tokenizer, self.max_turns, self.timeout_s = tokenizer, max_turns, timeout_s
        self.fmt = fmt if fmt is not None else tool_format(tokenizer)

    def rollout(self, generate: Generate, prompts: Sequence[Prompt], params: SamplingParams) -> list[Sample]:
        episodes = [Episode(p, messages=[{"from": "system", "value": SYSTEM},
                                         {"from": "human", "value": p.meta["question"]}],
                            chat=list(p.source)) for p in prompts]
        for turn in range(self.max_turns):
            active = [e for e in episodes if not e.done]
            if not active:
                break
            turn_params = replace(params, seed=None if params.seed is None else params.seed + 7919 * turn)
            outs = generate([e.prompt.ids + e.ids for e in active], turn_params)
            version = getattr(outs, "policy_version", -1)
            for episode, out in zip(active, outs):
                self._step(episode, list(out.token_ids), list(out.logprobs), out.finish_reason, version)
        for e in episodes:
            if not e.done:
                e.done, e.finish = True, "max_turns"
        return [self._sample(e) for e in episodes]

    def _step(self, e: Episode, ids: list[int], logprobs: list[float], finish: str, version: int = -1) -> None:
        e.add(ids, logprobs, version)
        e.turns += 1
        text = completion_text(self.tokenizer, ids)
        e.messages.append({"from": "gpt", "value": text})
        e.chat.append({"role": "assistant", "content": text})
        if finish != "stop":
            e.chat[-1]["truncated"] = True
            e.done, e.finish = True, "length"
            return
        results = run_calls(text, self.timeout_s)
        if results is None:
            e.done, e.finish = True, "answer"
            return
        e.tool_calls += len(results)
        if e.turns >= self.max_turns:
            e.done, e.finish = True, "max_turns"
            return
        e.add(encode(self.tokenizer, forced_text(self.tokenizer, e.chat, results, self.fmt)), None)
        e.messages.append({"from": "tool", "value": hermes_tool_value(results)})
        e.chat.extend(self.fmt.tool_messages(results))

    def _sample(self, e: Episode) -> Sample:
        final = e.messages[-1]["value"].strip() if e.finish == "answer" else None
        meta = {"prompt": e.prompt.source, "completion": e.chat[2:],
                "columns": e.prompt.columns, "final_answer": final, "prompt_index": e.prompt.index,
                "turns": e.turns, "tool_calls": e.tool_calls, "finish_reason": e.finish,
                "messages": e.messages}
        known = all(v >= 0 for v, m in zip(e.versions, e.mask) if m)
        return Sample(list(e.prompt.ids), e.ids, e.logprobs, e.mask, meta,
                      token_versions=list(e.versions) if known else None)


def final_answer(completions, answer, **kwargs) -> list[float]:
    """1.0 when the episode ended on an assistant message without a tool call whose text is the answer.
    (A turn cut by the token budget never counts: :class:`ToolEnv` leaves it out of ``completions``' final
    position by ending the episode with ``finish_reason`` "length", and its text is checked here too.)"""
    out = []
    for completion, truth in zip(completions, answer):
        last = completion[-1] if completion else {}
        text = str(last.get("content") or "")
        out.append(float(last.get("role") == "assistant" and not last.get("truncated")
                         and "<tool_call>" not in text and text.strip() == truth))
    return out


def to_hermes_row(sample: Sample, row_id: str) -> dict:
    """The episode as a Hermes ShareGPT row (``conversations`` + ``tools``) for ``trajkit traces``."""
    return {"id": row_id, "conversations": sample.metadata["messages"], "tools": json.dumps([CALCULATOR]),
            "category": "rl", "task": "calculator"}


def save_episodes(samples: Sequence[Sample], path: str, prefix: str = "episode") -> int:
    """Append tool-use episodes to ``path`` as Hermes JSONL rows; returns the number written."""
    rows = [to_hermes_row(s, f"{prefix}-{i}") for i, s in enumerate(samples) if "messages" in s.metadata]
    with open(path, "a", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return len(rows)


class CalculatorTask:
    """"What is a <op> b?" answered with the calculator; reward = exact final answer."""

    name = "calculator"

    def __init__(self, seed: int, tokenizer, max_len: int = 3, max_turns: int = 3, timeout_s: float = 0.5):
        self.seed, self.max_len, self.tokenizer = seed, max_len, tokenizer
        self.env = ToolEnv(tokenizer, max_turns, timeout_s)
        self.reward_funcs = [final_answer]

    def prompt(self, index: int, split: str = "train") -> Prompt:
        rng = rng_for(self.seed, index, split)
        a, b = rng.randrange(10 ** self.max_len), rng.randrange(10 ** self.max_len)
        op = rng.choice("+-*")
        question = f"What is {a}{op}{b}?"
        chat = self.env.fmt.start_chat(question)
        text = render(self.tokenizer, chat, self.env.fmt.tools, add_generation_prompt=True)
        return Prompt(text, encode(self.tokenizer, text), index, {"answer": evaluate(f"{a}{op}{b}")},
                      {"question": question}, source=chat)

    def demonstration(self, prompt: Prompt) -> Sample:
        """The ideal episode: one calculator call, the forced tool turn, then the answer."""
        expr = prompt.meta["question"][len("What is "):-1]
        call = json.dumps({"name": "calculator", "arguments": {"expression": expr}})
        turns = iter([f"<tool_call>\n{call}\n</tool_call>", prompt.answer])

        def scripted(prompt_ids, params):
            text = next(turns)
            ids = encode(self.tokenizer, text) + [self.tokenizer.eos_token_id]
            return [_Scripted(ids, [0.0] * len(ids), "stop")]
        return self.env.rollout(scripted, [prompt], SamplingParams())[0]


@dataclass
class _Scripted:
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
