"""The HTTP surface: FastAPI routes over a :class:`~trajkit.gateway.service.Gateway`.

OpenAI-compatible: ``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models`` (with vLLM's
``max_model_len``); vLLM's token route ``POST /inference/v1/generate`` that verifiers' ``TrainClient`` calls
(:mod:`.generate`); plus
``GET /health``, ``GET /metrics`` (Prometheus text: the prefix cache's counters, :mod:`.metrics`), ``/api/show`` answered 404 (Ollama's probe, which harnesses such as the Hermes Agent try
first), and read-only ``/trajkit/sessions…`` routes for the records, stitched samples and Hermes rows.

Every route is behind one gate, an app-wide dependency (:mod:`.access`): it names an inference request's
session (handlers take the session from it, never from the headers), and on a locked gateway refuses what the
request's key may not reach (401/403) before any handler runs.

``stream: true`` is served as Server-Sent Events in OpenAI's chunk format (``delta.role``, then
``delta.reasoning_content``, ``delta.content``, ``delta.tool_calls``, a chunk with ``finish_reason``, the
usage chunk when ``stream_options.include_usage``, then ``data: [DONE]``). Text is streamed as it is
sampled: the scheduler hands each choice's new tokens to :class:`~trajkit.gateway.live.LiveText`, which sends
every delta that is sure to be a prefix of the final ``content`` (chat: the text before any ``<think>`` /
``<tool_call>`` block). What it held back, the reasoning and the ``tool_calls`` are parsed once the choice
ends and follow in the final chunks; the concatenated deltas equal the non-streaming message.

Every error is an OpenAI-style body ``{"error": {"message", "type", "param", "code"}}``: 4xx for the
client's mistakes (naming the field), 500 for the server's own, and the server keeps serving either way.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from trajkit.errors import TrajkitError
from trajkit.gateway.errors import ApiError
from trajkit.gateway.export import session_hermes_rows, session_samples
from trajkit.gateway.live import rest
from trajkit.gateway.metrics import prometheus_text
from trajkit.gateway.service import Gateway

log = logging.getLogger("trajkit.gateway")


def create_app(gateway: Gateway) -> FastAPI:
    access = gateway.access

    async def gate(request: Request) -> None:  # every route's dependency (module docstring)
        request.state.session = access.check(request.url.path, request.headers)

    app = FastAPI(title="trajkit gateway", docs_url=None, redoc_url=None, dependencies=[Depends(gate)])
    app.state.gateway = gateway

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError):
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(Exception)
    async def _server_error(_request: Request, exc: Exception):
        log.exception("request failed")
        status = 400 if isinstance(exc, TrajkitError) else 500
        kind = "invalid_request_error" if status == 400 else "server_error"
        return JSONResponse(ApiError(f"{type(exc).__name__}: {exc}", status=status, type=kind).body(),
                            status_code=status)

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await _json(request)
        if _streaming(body):
            return await _stream(gateway.chat, body, request.state.session, "chat.completion.chunk", _chat_chunks)
        return await gateway.chat(body, request.state.session)

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await _json(request)
        if _streaming(body):
            return await _stream(gateway.completion, body, request.state.session, "text_completion",
                                 _completion_chunks)
        return await gateway.completion(body, request.state.session)

    @app.post("/inference/v1/generate")
    async def generate(request: Request):  # verifiers' token route (.generate), at the root as vLLM serves it
        return await gateway.generate(await _json(request), request.state.session)

    @app.get("/v1/models")
    async def models():
        return gateway.models_list()

    @app.get("/health")
    async def health(request: Request):
        if not access.admin(request.headers):
            return {"status": "ok"}
        return {"status": "ok", "sessions": len(gateway.sessions.ids()), "engine_calls": gateway.scheduler.calls,
                "policy_version": gateway.backend.policy_version}

    @app.get("/metrics")
    async def metrics():
        return PlainTextResponse(prometheus_text(gateway), media_type="text/plain; version=0.0.4")

    @app.api_route("/api/show", methods=["GET", "POST"])
    async def api_show():
        return JSONResponse(ApiError("not an Ollama server", status=404, code="not_found").body(), status_code=404)

    @app.get("/trajkit/sessions")
    async def sessions():
        return {"data": [{"id": s.id, "model": s.model, "calls": len(s.records)} for s in gateway.sessions.all()]}

    @app.get("/trajkit/sessions/{sid}/{what}")
    async def session_view(sid: str, what: str):
        session = gateway.sessions.find(sid)
        if session is None:
            raise ApiError(f"no session {sid!r}", param="session", status=404, code="not_found")
        views = {"records": lambda: [r.as_dict() for r in session.records],
                 "samples": lambda: session_samples(session), "hermes": lambda: session_hermes_rows(session)}
        if what not in views:
            raise ApiError(f"unknown view {what!r}; use one of {', '.join(views)}", param="view", status=404)
        return {"data": views[what]()}

    return app


MAX_BODY_BYTES = 32 << 20  # the largest request body read (32 MiB); a larger one is 413


async def _json(request: Request, limit: int = MAX_BODY_BYTES) -> Any:
    """The JSON body, read up to ``limit`` bytes: a ``Content-Length`` over it is refused before reading, a
    chunked body as soon as what arrived passes it (413), so a request never costs more than ``limit`` bytes."""
    too_large = ApiError(f"the request body is over the gateway's limit of {limit} bytes", param="body",
                         status=413, code="request_too_large")
    length = request.headers.get("content-length")
    if length is not None and length.strip().isdigit() and int(length) > limit:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        raise ApiError("the request body is not valid JSON", param="body") from None


def _streaming(body: Any) -> bool:
    return isinstance(body, dict) and body.get("stream") is True


class _Live:
    """The SSE side of a streaming request: deltas queued on the event loop, sent in order."""

    def __init__(self):
        self.queue: asyncio.Queue = asyncio.Queue()
        self.started = asyncio.Event()
        self.sent: dict[int, str] = {}

    def start(self) -> None:
        self.started.set()

    def text(self, choice: int, delta: str) -> None:
        self.queue.put_nowait((choice, delta))


async def _stream(handler, body: dict[str, Any], sid: str, obj: str, final_chunks) -> StreamingResponse:
    """Start ``handler`` with a live listener; a request that fails before it is queued raises here (4xx)."""
    live = _Live()
    task = asyncio.ensure_future(handler(body, sid, live))
    started = asyncio.ensure_future(live.started.wait())
    await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        started.cancel()
        task.result()  # raises the request's error
    usage = bool((body.get("stream_options") or {}).get("include_usage"))
    head = {"id": f"{'chatcmpl' if obj.startswith('chat') else 'cmpl'}-{uuid.uuid4().hex[:24]}",
            "model": body.get("model")}
    return StreamingResponse(_sse(_events(live, task, head, obj, final_chunks, usage)),
                             media_type="text/event-stream")


async def _events(live: _Live, task, head: dict, obj: str, final_chunks, usage: bool) -> AsyncIterator[dict]:
    chat = obj.startswith("chat")
    opened: set[int] = set()
    while True:
        getter = asyncio.ensure_future(live.queue.get())
        await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
        if not getter.done():
            getter.cancel()
            break
        k, delta = getter.result()
        if chat and k not in opened:
            opened.add(k)
            yield _chunk(head, obj, [_delta(k, {"role": "assistant", "content": ""})])
        live.sent[k] = live.sent.get(k, "") + delta
        yield _chunk(head, obj, [_delta(k, {"content": delta}) if chat else _text(k, delta)])
    while not live.queue.empty():  # deltas queued just before the end
        k, delta = live.queue.get_nowait()
        live.sent[k] = live.sent.get(k, "") + delta
        yield _chunk(head, obj, [_delta(k, {"content": delta}) if chat else _text(k, delta)])
    out = {**task.result(), "id": head["id"]}
    for chunk in final_chunks(out, usage, live.sent, opened):
        yield chunk


def _delta(k: int, delta: dict) -> dict[str, Any]:
    return {"index": k, "delta": delta, "finish_reason": None, "logprobs": None}


def _text(k: int, text: str) -> dict[str, Any]:
    return {"index": k, "text": text, "finish_reason": None, "logprobs": None}


async def _sse(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    async for chunk in chunks:
        yield "data: " + json.dumps(chunk, ensure_ascii=False) + "\n\n"
    yield "data: [DONE]\n\n"


def _chunk(out: dict[str, Any], obj: str, choices: list, **extra) -> dict[str, Any]:
    return {"id": out["id"], "object": obj, "created": int(time.time()), "model": out["model"],
            "choices": choices, **extra}


def _chat_chunks(out: dict[str, Any], usage: bool, sent: dict[int, str], opened: set[int]) -> Iterator[dict[str, Any]]:
    """The end of a streamed chat response: per choice the rest of the content, reasoning, tool calls, finish."""
    obj = "chat.completion.chunk"
    for choice in out["choices"]:
        k, msg = choice["index"], choice["message"]
        deltas = [] if k in opened else [{"role": "assistant", "content": ""}]
        if msg.get("reasoning_content") is not None:
            deltas.append({"reasoning_content": msg["reasoning_content"]})
        more = rest(msg.get("content"), sent.get(k, ""))
        if more:
            deltas.append({"content": more})
        for i, call in enumerate(msg.get("tool_calls") or []):
            deltas.append({"tool_calls": [{"index": i, **call}]})
        for delta in deltas:
            yield _chunk(out, obj, [{"index": k, "delta": delta, "finish_reason": None, "logprobs": None}])
        last = {"index": k, "delta": {}, "finish_reason": choice["finish_reason"],
                "logprobs": choice["logprobs"]}  # logprobs=true: every token's, in the finishing chunk
        if msg.get("trajkit_diagnostics"):
            last["trajkit_diagnostics"] = msg["trajkit_diagnostics"]
        yield _chunk(out, obj, [last], trajkit=out["trajkit"])
    if usage:
        yield _chunk(out, obj, [], usage=out["usage"])


def _completion_chunks(out: dict[str, Any], usage: bool, sent: dict[int, str], _opened) -> Iterator[dict[str, Any]]:
    for choice in out["choices"]:
        more = rest(choice["text"], sent.get(choice["index"], ""))
        if more:
            yield _chunk(out, "text_completion", [_text(choice["index"], more)])
        yield _chunk(out, "text_completion", [{"index": choice["index"], "text": "",
                                              "finish_reason": choice["finish_reason"],
                                              "logprobs": choice["logprobs"]}])
    if usage:
        yield _chunk(out, "text_completion", [], usage=out["usage"])
