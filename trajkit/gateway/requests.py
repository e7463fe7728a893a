"""Request bodies -> validated, typed requests; anything wrong is an :class:`ApiError` naming the field.

Fields the gateway does not use (``frequency_penalty``, ``user``, ``parallel_tool_calls``, ...) are ignored,
as OpenAI-compatible servers do: harnesses send them routinely. ``top_k`` is accepted as an extension
(``-1`` or ``0`` = off, vLLM's convention).

As OpenAI: a ``tool`` message needs its ``tool_call_id``, and an assistant tool call its ``id`` and
``function.arguments``. ``arguments`` is a string and is *not* required to be JSON (OpenAI accepts a model's
malformed arguments sent back in the history): it is kept and rendered verbatim, so the history a model wrote
re-renders as it wrote it. An object is accepted too (as vLLM does) and taken as its JSON text.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from trajkit.gateway.errors import ApiError

ROLES = ("system", "developer", "user", "assistant", "tool")


@dataclass
class Sampling:
    """The sampling fields of a request (``max_tokens`` None = the server's default)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    n: int = 1
    logprobs: bool = False  # return each sampled token's log-prob (chat: logprobs=true; completions: logprobs=N)
    top_logprobs: int = 0  # and the N most likely tokens at each position


@dataclass
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    tool_choice: Any
    sampling: Sampling
    stream: bool = False
    include_usage: bool = False


@dataclass
class CompletionRequest:
    model: str
    prompt: str | list[int]
    sampling: Sampling
    stream: bool = False
    include_usage: bool = False


def _need(cond: bool, message: str, param: str) -> None:
    if not cond:
        raise ApiError(message, param=param)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(body: dict, name: str, default: float, low: float, high: float, low_open: bool = False) -> float:
    v = body.get(name)
    if v is None:
        return default
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    ok = ok and (v > low if low_open else v >= low) and v <= high
    _need(ok, f"{name} must be a number in {'(' if low_open else '['}{low:g}, {high:g}], got {v!r}", name)
    return float(v)


def sampling(body: dict, max_n: int) -> Sampling:
    s = Sampling(temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
                 top_p=_number(body, "top_p", 1.0, 0.0, 1.0, low_open=True))
    top_k = body.get("top_k")
    if top_k is not None:
        _need(_is_int(top_k) and top_k >= -1, f"top_k must be an integer >= -1 (-1 or 0 = off), got {top_k!r}",
              "top_k")
        s.top_k = max(top_k, 0)
    name = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    mt = body.get(name)
    if mt is not None:
        _need(_is_int(mt) and mt >= 1, f"{name} must be an integer >= 1, got {mt!r}", name)
        s.max_tokens = mt
    stop = body.get("stop")
    if stop is not None:
        stop = [stop] if isinstance(stop, str) else stop
        _need(isinstance(stop, list) and len(stop) <= 4 and all(isinstance(x, str) and x for x in stop),
              "stop must be a non-empty string or a list of at most 4 of them", "stop")
        s.stop = stop
    seed = body.get("seed")
    if seed is not None:
        _need(_is_int(seed) and 0 <= seed < 2 ** 63, f"seed must be an integer in [0, 2**63), got {seed!r}", "seed")
        s.seed = seed
    n = body.get("n", 1)
    n = 1 if n is None else n
    _need(_is_int(n) and 1 <= n <= max_n, f"n must be an integer in [1, {max_n}], got {n!r}", "n")
    s.n = n
    return s


def _stream(body: dict) -> tuple[bool, bool]:
    stream = body.get("stream") or False
    _need(isinstance(stream, bool), f"stream must be true or false, got {stream!r}", "stream")
    opts = body.get("stream_options") or {}
    _need(isinstance(opts, dict), "stream_options must be an object", "stream_options")
    usage = opts.get("include_usage", False)
    _need(isinstance(usage, bool), "stream_options.include_usage must be true or false",
          "stream_options.include_usage")
    return stream, usage


def _model(body: dict) -> str:
    model = body.get("model")
    _need(isinstance(model, str) and model != "", "model is required (a string; see /v1/models)", "model")
    return model


def chat_request(body: Any, max_n: int) -> ChatRequest:
    _need(isinstance(body, dict), "the request body must be a JSON object", "body")
    model = _model(body)
    messages = body.get("messages")
    _need(isinstance(messages, list) and len(messages) > 0, "messages must be a non-empty list", "messages")
    norm = [_message(m, i) for i, m in enumerate(messages)]
    tools = _tools(body.get("tools"))
    choice = _tool_choice(body.get("tool_choice"), tools)
    stream, usage = _stream(body)
    s = sampling(body, max_n)
    lp = body.get("logprobs")
    _need(lp is None or isinstance(lp, bool), f"logprobs must be true or false, got {lp!r}", "logprobs")
    s.logprobs = bool(lp)
    top = body.get("top_logprobs")
    _need(top is None or (_is_int(top) and 0 <= top <= 20), f"top_logprobs must be an integer in [0, 20], got {top!r}",
          "top_logprobs")
    _need(not top or s.logprobs, "top_logprobs needs logprobs: true", "top_logprobs")
    s.top_logprobs = top or 0
    return ChatRequest(model, norm, tools, choice, s, stream, usage)


def completion_request(body: Any, max_n: int) -> CompletionRequest:
    _need(isinstance(body, dict), "the request body must be a JSON object", "body")
    model = _model(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    ok = (isinstance(prompt, str) and prompt != "") or (
        isinstance(prompt, list) and len(prompt) > 0 and all(_is_int(t) and t >= 0 for t in prompt))
    _need(ok, "prompt must be a non-empty string or a non-empty list of token ids (one prompt per request)",
          "prompt")
    stream, usage = _stream(body)
    s = sampling(body, max_n)
    lp = body.get("logprobs")
    _need(lp is None or (_is_int(lp) and 0 <= lp <= 5), f"logprobs must be an integer in [0, 5], got {lp!r}",
          "logprobs")
    s.logprobs = lp is not None
    s.top_logprobs = lp or 0
    return CompletionRequest(model, prompt, s, stream, usage)


def _text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            _need(isinstance(part, dict) and part.get("type", "text") == "text" and isinstance(part.get("text"), str),
                  "only text content parts are supported ({type: text, text: str})", f"{where}[{j}]")
            parts.append(part["text"])
        return "".join(parts)
    raise ApiError(f"content is a {type(content).__name__}; expected a string or a list of text parts", param=where)


def _message(m: Any, i: int) -> dict[str, Any]:
    where = f"messages[{i}]"
    _need(isinstance(m, dict), "each message must be an object {role, content}", where)
    role = m.get("role")
    _need(role in ROLES, f"role must be one of {', '.join(ROLES)}, got {role!r}", f"{where}.role")
    out: dict[str, Any] = {"role": "system" if role == "developer" else role,
                           "content": _text(m.get("content"), f"{where}.content")}
    if role == "assistant":
        reasoning = m.get("reasoning_content", m.get("reasoning"))
        if reasoning is not None:
            _need(isinstance(reasoning, str), "reasoning_content must be a string", f"{where}.reasoning_content")
            out["reasoning_content"] = reasoning
        calls = m.get("tool_calls")
        if calls:
            _need(isinstance(calls, list), "tool_calls must be a list", f"{where}.tool_calls")
            out["tool_calls"] = [_call(c, f"{where}.tool_calls[{k}]") for k, c in enumerate(calls)]
    elif role == "tool":
        call_id = m.get("tool_call_id")
        _need(call_id is not None and call_id != "", "Missing parameter 'tool_call_id': messages with role 'tool' "
              "must have a 'tool_call_id'", f"{where}.tool_call_id")
        _need(isinstance(call_id, str), f"tool_call_id must be a string, got {call_id!r}", f"{where}.tool_call_id")
        out["tool_call_id"] = call_id
        if isinstance(m.get("name"), str):
            out["name"] = m["name"]
    elif role == "user" or role == "system":
        _need(m.get("content") is not None, "content is required", f"{where}.content")
    return out


def _call(c: Any, where: str) -> dict[str, Any]:
    _need(isinstance(c, dict) and isinstance(c.get("function"), dict), "a tool call needs a function object",
          f"{where}.function")
    fn = c["function"]
    _need(isinstance(fn.get("name"), str) and fn["name"] != "", "function.name must be a non-empty string",
          f"{where}.function.name")
    _need(isinstance(c.get("id"), str) and c["id"] != "", f"Missing required parameter: '{where}.id'", f"{where}.id")
    args = fn.get("arguments")
    _need(args is not None, f"Missing required parameter: '{where}.function.arguments'", f"{where}.function.arguments")
    _need(isinstance(args, (str, dict)), "function.arguments must be a string (the call's JSON, as the model "
          f"wrote it), got {type(args).__name__}", f"{where}.function.arguments")
    if isinstance(args, dict):  # vLLM's leniency: an object is taken as its JSON
        args = json.dumps(args, ensure_ascii=False)
    return {"id": c["id"], "type": "function", "function": {"name": fn["name"], "arguments": args}}


def _tools(tools: Any) -> list[dict[str, Any]] | None:
    if tools is None or tools == []:
        return None
    _need(isinstance(tools, list), "tools must be a list of {type: function, function: {...}}", "tools")
    out = []
    for k, t in enumerate(tools):
        where = f"tools[{k}]"
        _need(isinstance(t, dict) and t.get("type", "function") == "function" and isinstance(t.get("function"), dict),
              "each tool must be {type: function, function: {name, description, parameters}}", where)
        fn = t["function"]
        _need(isinstance(fn.get("name"), str) and fn["name"] != "", "function.name must be a non-empty string",
              f"{where}.function.name")
        _need(fn.get("parameters") is None or isinstance(fn["parameters"], dict),
              "function.parameters must be a JSON schema object", f"{where}.function.parameters")
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(choice: Any, tools: list | None) -> Any:
    if choice is None:
        return "auto"
    if choice in ("none", "auto", "required"):
        return choice
    ok = isinstance(choice, dict) and isinstance(choice.get("function"), dict) \
        and isinstance(choice["function"].get("name"), str)
    _need(ok, "tool_choice must be none, auto, required or {type: function, function: {name}}", "tool_choice")
    names = {t["function"]["name"] for t in tools or []}
    _need(choice["function"]["name"] in names, f"tool_choice names {choice['function']['name']!r}, "
          "which is not in tools", "tool_choice")
    return choice
