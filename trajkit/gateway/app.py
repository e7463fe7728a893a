"""The HTTP surface: FastAPI routes over a :class:`~trajkit.gateway.service.Gateway`.

OpenAI-compatible: ``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models``; plus
``GET /health``, ``/api/show`` answered 404 (Ollama's probe, which harnesses such as the Hermes Agent try
first), and read-only ``/trajkit/sessions…`` routes for the records, stitched samples and Hermes rows.

``stream: true`` is served as Server-Sent Events in OpenAI's chunk format (``delta.role``, then
``delta.reasoning_content``, ``delta.content``, ``delta.tool_calls``, a chunk with ``finish_reason``, the
usage chunk when ``stream_options.include_usage``, then ``data: [DONE]``). The chunks are sent once the
choice is complete (the engine hands back whole completions): a streaming client gets the same bytes as
from a token-by-token server, later.

Every error is an OpenAI-style body ``{"error": {"message", "type", "param", "code"}}``: 4xx for the
client's mistakes (naming the field), 500 for the server's own, and the server keeps serving either way.
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from trajkit.errors import TrajkitError
from trajkit.gateway.errors import ApiError
from trajkit.gateway.export import session_hermes_rows, session_samples
from trajkit.gateway.service import Gateway
from trajkit.gateway.sessions import session_id

log = logging.getLogger("trajkit.gateway")


def create_app(gateway: Gateway) -> FastAPI:
    app = FastAPI(title="trajkit gateway", docs_url=None, redoc_url=None)
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
        out = await gateway.chat(body, session_id(request.headers))
        return _reply(out, body, _chat_chunks)

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await _json(request)
        out = await gateway.completion(body, session_id(request.headers))
        return _reply(out, body, _completion_chunks)

    @app.get("/v1/models")
    async def models():
        return gateway.models_list()

    @app.get("/health")
    async def health():
        return {"status": "ok", "sessions": len(gateway.sessions.ids()), "engine_calls": gateway.scheduler.calls,
                "policy_version": gateway.engine.policy_version}

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


async def _json(request: Request) -> Any:
    try:
        return await request.json()
    except ValueError:
        raise ApiError("the request body is not valid JSON", param="body") from None


def _reply(out: dict[str, Any], body: dict[str, Any], chunks) -> Any:
    if not body.get("stream"):
        return out
    usage = bool((body.get("stream_options") or {}).get("include_usage"))
    return StreamingResponse(_sse(chunks(out, usage)), media_type="text/event-stream")


def _sse(chunks: Iterator[dict[str, Any]]) -> Iterator[str]:
    for chunk in chunks:
        yield "data: " + json.dumps(chunk, ensure_ascii=False) + "\n\n"
    yield "data: [DONE]\n\n"


def _chunk(out: dict[str, Any], obj: str, choices: list, **extra) -> dict[str, Any]:
    return {"id": out["id"], "object": obj, "created": int(time.time()), "model": out["model"],
            "choices": choices, **extra}


def _chat_chunks(out: dict[str, Any], usage: bool) -> Iterator[dict[str, Any]]:
    obj = "chat.completion.chunk"
    for choice in out["choices"]:
        k, msg = choice["index"], choice["message"]
        deltas = [{"role": "assistant", "content": ""}]
        if msg.get("reasoning_content") is not None:
            deltas.append({"reasoning_content": msg["reasoning_content"]})
        if msg.get("content"):
            deltas.append({"content": msg["content"]})
        for i, call in enumerate(msg.get("tool_calls") or []):
            deltas.append({"tool_calls": [{"index": i, **call}]})
        for delta in deltas:
            yield _chunk(out, obj, [{"index": k, "delta": delta, "finish_reason": None, "logprobs": None}])
        last = {"index": k, "delta": {}, "finish_reason": choice["finish_reason"], "logprobs": None}
        if msg.get("trajkit_diagnostics"):
            last["trajkit_diagnostics"] = msg["trajkit_diagnostics"]
        yield _chunk(out, obj, [last], trajkit=out["trajkit"])
    if usage:
        yield _chunk(out, obj, [], usage=out["usage"])


def _completion_chunks(out: dict[str, Any], usage: bool) -> Iterator[dict[str, Any]]:
    for choice in out["choices"]:
        yield _chunk(out, "text_completion", [{"index": choice["index"], "text": choice["text"],
                                              "finish_reason": None, "logprobs": None}])
        yield _chunk(out, "text_completion", [{"index": choice["index"], "text": "",
                                              "finish_reason": choice["finish_reason"], "logprobs": None}])
    if usage:
        yield _chunk(out, "text_completion", [], usage=out["usage"])
