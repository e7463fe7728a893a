"""Planning, filling and rendering of one synthetic row (internal to :mod:`trajkit.synth`).

A row is planned as a list of :class:`Spec` (one per tool-calling assistant turn, saying which quirks land
on it), filled into structured items (:class:`Turn`, :class:`ToolMsg`, :class:`Human`) whose calls and
responses carry their ground truth (malformed kind, schema violation, declared failure), and rendered to
the Hermes ShareGPT text. The truth is computed from the items by ``generator.truth_of``.
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from typing import Any

import orjson

from trajkit.synth import sim
from trajkit.synth import text
from trajkit.synth.text import pick
from trajkit.synth.tools import CATALOGUE, HALLUCINATED_TOOLS

# Call-level quirks: the event name on a planned call -> the config rate that switches it on for a row.
CALL_EVENTS = {"malformed": "malformed_rate", "unknown": "unknown_tool_rate", "invalid": "invalid_args_rate",
               "fail": "failure_rate", "nonzero": "nonzero_exit_rate", "truncate": "truncation_rate",
               "html": "html_payload_rate", "string": "string_content_rate", "raw": "raw_response_rate"}
_JSON = json.JSONEncoder(ensure_ascii=False).encode  # the real rows' separators, non-ASCII kept
RESPONSE_EVENTS = frozenset({"fail", "nonzero", "truncate", "html", "string", "raw"})  # need a response
_PARSE_ERRORS = {
    "python_dict": "arguments are not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2)",
    "truncated": "could not parse tool call JSON (Unterminated string)",
    "unclosed": "unterminated tool_call block (generation stopped)",
    "missing_arguments": "missing required field 'arguments'",
    "string_arguments": "'arguments' must be an object, got str",
}


@dataclass
class Call:
    name: str
    args: dict | None
    malformed: str | None = None  # one of generator.MALFORMED_KINDS
    invalid: bool = False  # arguments violate the tool's schema (by construction)
    valid_args: dict | None = None  # the arguments before any corruption
    error: str = ""  # what a strict tool answers to the invalid arguments
    text: str = ""
    _key: tuple[str, bytes] | None = field(default=None, repr=False, compare=False)

    def key(self) -> tuple[str, bytes] | None:
        """(name, canonical arguments) of a well-formed call; None for a malformed one."""
        if self.malformed:
            return None
        if self._key is None:
            self._key = (self.name, orjson.dumps(self.args, option=orjson.OPT_SORT_KEYS))
        return self._key


@dataclass
class Resp:
    name: str
    content: Any
    failed: bool
    nonzero: bool = False
    raw: str | None = None  # the block body when it is not a JSON object
    call_id: str = ""


@dataclass
class Turn:
    think: str
    narration: str
    calls: list[Call]
    answer: str = ""


@dataclass
class ToolMsg:
    responses: list[Resp]


@dataclass
class Human:
    text: str


@dataclass
class Spec:
    """One planned tool-calling assistant turn."""

    width: int = 1
    events: list[str] = field(default_factory=list)
    silent: bool = False  # no tool message follows: the next gpt turn comes right after
    drop: bool = False  # the tool message lacks the response to the last call
    extra: bool = False  # the tool message repeats its last response (an orphan)
    summary: bool = False  # a [CONTEXT SUMMARY] human turn follows the tool message
    orphan_msg: bool = False  # ... and then a stray tool message (all orphans)
    retry: bool = False  # repeat the previous turn's single call, name and arguments
    retry_fails: bool = False
    locked: bool = False  # part of a retry chain: no other quirk lands here


# ---- plan -------------------------------------------------------------------------------------------------
def plan_turns(rng: random.Random, cfg) -> list[Spec]:
    """Decide the row's tool-calling turns and put each quirk the row carries on one of them. The number of
    turns is log-normal around (min + max) / 3 (5.7 for the defaults), clipped to [min, max], then raised
    when the row's quirks need more turns than that (each call-level quirk gets a turn of its own)."""
    events: list[str] = []
    for event, rate in CALL_EVENTS.items():
        if rng.random() < getattr(cfg, rate):
            events += [event] * (1 if rng.random() < 0.7 else 2)
    on = {k: rng.random() < getattr(cfg, k) for k in ("retry_rate", "consecutive_gpt_rate", "response_mismatch_rate",
                                                      "context_summary_rate", "orphan_message_rate", "parallel_rate")}
    need = len(events) + 1 + 3 * on["retry_rate"] + on["consecutive_gpt_rate"] + on["response_mismatch_rate"]
    mean = (cfg.min_tool_turns + cfg.max_tool_turns) / 3
    drawn = round(math.exp(rng.gauss(math.log(max(mean, 1.0)), 0.5)))
    specs = [Spec() for _ in range(max(need, min(cfg.max_tool_turns, max(cfg.min_tool_turns, drawn))))]
    if on["retry_rate"]:
        _plan_retry(rng, specs)
    free = [i for i, s in enumerate(specs) if not s.locked]
    rng.shuffle(free)
    if on["consecutive_gpt_rate"]:
        specs[free[0]].silent = True
    for event in events:
        ok = [i for i in free if not (specs[i].silent and event in RESPONSE_EVENTS)]
        target = ([i for i in ok if not specs[i].events] or ok)[0]
        specs[target].events.append(event)
    loud = [i for i in free if not specs[i].silent]
    if on["response_mismatch_rate"]:
        target = ([i for i in loud if not specs[i].events] or loud)[0]
        if rng.random() < 0.5:
            specs[target].drop, specs[target].width = True, max(2, specs[target].width)
        else:
            specs[target].extra = True
    if on["context_summary_rate"] or on["orphan_message_rate"]:
        where = [i for i, s in enumerate(specs) if not s.silent]
        middle = [i for i in where if 0 < i < len(specs) - 1] or where
        target = pick(rng, middle)
        specs[target].summary, specs[target].orphan_msg = True, on["orphan_message_rate"]
    if on["parallel_rate"]:
        for i in rng.sample(free, min(len(free), pick(rng, (1, 1, 2)))):
            specs[i].width = max(specs[i].width, rng.randint(2, 4))
    return specs


def _plan_retry(rng: random.Random, specs: list[Spec]) -> None:
    t = rng.randint(1, len(specs) - 2)
    chain = 2 if rng.random() < 0.3 else 1
    specs[t - 1] = Spec(events=["fail"], locked=True)
    for j in range(chain):
        specs[t + j] = Spec(retry=True, locked=True, retry_fails=j < chain - 1 or rng.random() < 0.3)


# ---- fill -------------------------------------------------------------------------------------------------
def fill_row(rng: random.Random, cfg, scene: text.Scene, specs: list[Spec]) -> list[Turn | ToolMsg | Human]:
    """Structured conversation after the first human message, ending with the final answer turn."""
    kimi = cfg.style == "kimi"
    scene.weights = {n: w for n, w in scene.weights.items() if n in scene.tools}
    budgets = _think_budgets(rng, cfg, len(specs) + 1)
    items: list[Turn | ToolMsg | Human] = []
    reaction, prev_calls, counter, failures = None, [], 0, 0
    for ti, spec in enumerate(specs):
        last = next((c.key() for item in reversed(items) if isinstance(item, Turn)
                     for c in reversed(item.calls) if not c.malformed), None)
        calls, events = _turn_calls(rng, cfg, scene, spec, prev_calls, last)
        think = text.think_text(rng, scene, kimi, budgets[ti], reaction, [(c.name, c.args) for c in calls], ti == 0)
        narr = text.narration(rng) if rng.random() < cfg.narration_rate else ""
        items.append(Turn(think, narr, calls))
        prev_calls, counter = calls, counter + len(calls)
        if spec.silent:
            reaction = ("silent", calls[-1].name, "")
            continue
        resps = [_respond(rng, scene, c, ev, f"functions.{c.name}:{counter - len(calls) + j}")
                 for j, (c, ev) in enumerate(zip(calls, events))]
        resps = resps[:-1] if spec.drop else resps + ([resps[-1]] if spec.extra else [])
        items.append(ToolMsg(resps))
        failures += sum(r.failed for r in resps)
        reaction = _reaction(resps)
        if spec.summary:
            counter += rng.randint(3, 12)  # calls that the compression removed
            items.append(Human(text.context_summary(scene, rng.randint(4, 20))))
            if spec.orphan_msg:
                items.append(ToolMsg(_stray(rng, scene, counter)))
    answer = text.final_answer(rng, scene, kimi, failures)
    items.append(Turn(text.think_text(rng, scene, kimi, budgets[-1], reaction, [], not specs), "", [], answer))
    return items


def _think_budgets(rng: random.Random, cfg, n: int) -> list[int]:
    """Think words per assistant turn: a row total with mean ``think_words_mean`` (log-normal, sigma 0.5)
    spread over the non-empty turns, the first one weighted up."""
    total = cfg.think_words_mean * rng.lognormvariate(-0.125, 0.5)
    weights = [0.0 if rng.random() < cfg.empty_think_rate else (0.5 + rng.random()) * (1.8 if i == 0 else 1.0)
               for i in range(n)]
    scale = total / (sum(weights) or 1.0)
    return [round(w * scale) for w in weights]


def _weighted(rng: random.Random, scene: text.Scene, exclude: tuple[str, ...] = ()) -> str:
    names = [n for n in scene.weights if n not in exclude]
    return rng.choices(names, weights=[scene.weights[n] for n in names])[0]


def _turn_calls(rng, cfg, scene, spec: Spec, prev_calls: list[Call],
                last: tuple | None) -> tuple[list[Call], list[str | None]]:
    """The turn's calls and the event each carries; ``last`` is the key of the previous well-formed call."""
    if spec.retry:
        src = prev_calls[-1]
        return [Call(src.name, src.args, valid_args=src.valid_args, text=src.text)], [
            "fail" if spec.retry_fails else None]
    width = max(spec.width, len(spec.events))
    events: list[str | None] = list(spec.events) + [None] * (width - len(spec.events))
    rng.shuffle(events)
    same = _weighted(rng, scene) if width > 1 and rng.random() < 0.6 else None
    calls: list[Call] = []
    for event in events:
        unclosed_used = any(c.malformed == "unclosed" for c in calls)
        for _ in range(8):  # identical consecutive calls are retry loops: only the retry quirk makes them
            call = _one_call(rng, cfg, scene, event, same, unclosed_used)
            if call.malformed or call.key() != last:
                break
        calls.append(call)
        last = call.key() if not call.malformed else last
    order = sorted(range(width), key=lambda i: calls[i].malformed == "unclosed")  # an unclosed block goes last
    return [calls[i] for i in order], [events[i] for i in order]


def _one_call(rng, cfg, scene, event: str | None, same: str | None, unclosed_used: bool) -> Call:
    if event == "unknown":
        missing = [n for n in CATALOGUE if n not in scene.tools]
        name = pick(rng, missing) if missing and rng.random() < 0.3 else pick(rng, HALLUCINATED_TOOLS)
        args = sim.ARGS[name](scene, rng) if name in CATALOGUE else sim.unknown_args(name, scene, rng)
        return Call(name, args, valid_args=args, text=render_call(rng, name, args, None))
    pool = {"nonzero": ("terminal",), "truncate": sim.TRUNCATABLE, "html": sim.HTML_TOOLS}.get(event or "")
    if pool:
        name = pick(rng, [n for n in pool if n in scene.tools])
    elif event == "invalid":
        name = _weighted(rng, scene, exclude=("browser_snapshot",))
    else:
        name = same or _weighted(rng, scene)
    args = sim.ARGS[name](scene, rng)
    call = Call(name, args, valid_args=args)
    if event == "invalid":
        call.args, call.error = sim.corrupt(name, args, rng)
        call.invalid = True
    if event == "malformed":
        kinds = [k for k in cfg.malformed_kinds if not (unclosed_used and k == "unclosed")] or ["truncated"]
        call.malformed = pick(rng, kinds)
    call.text = render_call(rng, name, call.args, call.malformed)
    return call


def render_call(rng: random.Random, name: str, args: dict | None, kind: str | None) -> str:
    """The ``<tool_call>`` block of a call, well-formed or broken in the way ``kind`` names."""
    obj = {"name": name, "arguments": args}
    if kind is None:
        body = _JSON(obj)
    elif kind == "python_dict":
        body = repr(obj)
    elif kind in ("truncated", "unclosed"):
        full = _JSON(obj)
        body = full[: rng.randint(len(full) * 2 // 5, len(full) - 2)]  # a proper prefix is never valid JSON
    elif kind == "missing_arguments":
        flat = {"name": name, **(args or {})} if rng.random() < 0.5 else {"name": name}
        body = _JSON(flat)
    else:  # string_arguments
        body = _JSON({"name": name, "arguments": _JSON(args)})
    return "<tool_call>\n" + body + ("" if kind == "unclosed" else "\n</tool_call>")


def _respond(rng, scene, call: Call, event: str | None, call_id: str) -> Resp:
    name = call.name
    if call.malformed:
        tolerated = call.malformed in ("python_dict", "string_arguments") and rng.random() < 0.3
        res = sim.OK[name](scene, rng, call.valid_args) if tolerated else sim.Result(
            {"error": f"Invalid tool call: {_PARSE_ERRORS[call.malformed]}"}, True)
    elif name not in scene.tools:
        res = sim.Result({"error": f"Unknown tool '{name}'. Available tools: {', '.join(scene.tools)}"}, True)
    elif call.invalid:
        res = sim.Result({"error": call.error}, True) if rng.random() < 0.85 else sim.OK[name](scene, rng,
                                                                                                  call.valid_args)
    elif event == "fail" or (event == "string" and rng.random() < 0.5):
        res = sim.FAIL[name](scene, rng, call.args)
    elif event == "nonzero":
        res = sim.nonzero_terminal(scene, rng, call.args)
    elif event in ("truncate", "html"):
        res = (sim.truncated if event == "truncate" else sim.with_html)(name, scene, rng, call.args)
    else:
        res = sim.OK[name](scene, rng, call.args)
    if event == "string":
        res = sim.as_string(res, rng)
    if event == "raw":
        body, failed = sim.raw_block(rng)
        return Resp(name, None, failed, raw=body, call_id=call_id)
    return Resp(name, res.content, res.failed, res.nonzero, call_id=call_id)


def _stray(rng: random.Random, scene: text.Scene, counter: int) -> list[Resp]:
    """Responses left after a context summary whose calls were compressed away."""
    out = []
    for j in range(rng.randint(1, 2)):
        name = _weighted(rng, scene)
        res = sim.OK[name](scene, rng, sim.ARGS[name](scene, rng))
        out.append(Resp(name, res.content, res.failed, res.nonzero, call_id=f"functions.{name}:{counter - 1 - j}"))
    return out


def _error_text(r: Resp) -> str:
    if r.raw is not None:
        return r.raw.strip()[:60] or "empty output"
    if isinstance(r.content, str):
        return r.content.strip()[:60] or "empty result"
    return str(r.content.get("error") or r.content.get("message") or "success was false")[:60]


def _reaction(resps: list[Resp]) -> tuple[str, str, str]:
    for r in resps:
        if r.failed:
            return "fail", r.name, _error_text(r)
    if any(r.nonzero for r in resps):
        return "nonzero", "terminal", ""
    return "ok", resps[-1].name if resps else "", ""


# ---- render -----------------------------------------------------------------------------------------------
def _turn_text(turn: Turn) -> str:
    parts = ["<think>\n" + turn.think + "\n</think>"]
    parts += [p for p in (turn.narration, turn.answer) if p]
    parts += [c.text for c in turn.calls]
    return "\n".join(parts)


def _response_text(r: Resp) -> str:
    body = r.raw if r.raw is not None else _JSON(
        {"tool_call_id": r.call_id, "name": r.name, "content": r.content})
    return "<tool_response>\n" + body + "\n</tool_response>"


def render_row(row_id: str, scene: text.Scene, prompt: str, tools: str, items: list) -> dict:
    """The dataset row: ``id, conversations, tools, category, subcategory, task`` (the Hub's column order)."""
    conv = [{"from": "system", "value": prompt}, {"from": "human", "value": scene.human}]
    for item in items:
        if isinstance(item, Turn):
            conv.append({"from": "gpt", "value": _turn_text(item)})
        elif isinstance(item, ToolMsg):
            conv.append({"from": "tool", "value": "\n".join(_response_text(r) for r in item.responses)})
        else:
            conv.append({"from": "human", "value": item.text})
    return {"id": row_id, "conversations": conv, "tools": tools, "category": scene.category,
            "subcategory": scene.subcategory, "task": scene.task}
