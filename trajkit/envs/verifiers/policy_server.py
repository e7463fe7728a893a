"""A scripted policy as an OpenAI-compatible chat server on a loopback port (``envs check`` for verifiers).

verifiers' harness programs reach their model through verifiers' interception server, which forwards each chat
call to a client endpoint; for ``envs check`` that endpoint is this server and the "model" is a Python policy
``(messages) -> reply`` (the reference solver, the NOP, a probe). ``POST /v1/chat/completions`` answers with
the policy's reply (plain JSON, or server-sent events when ``stream`` is set); ``GET /v1/models`` lists the one
model. Only the messages' text reaches the policy (content parts are joined).
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Policy = Callable[[list[dict[str, str]]], str]
MODEL = "scripted"


def _text(content) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _completion(reply: str) -> dict:
    return {"id": "scripted", "object": "chat.completion", "created": int(time.time()), "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


def _chunks(reply: str) -> Iterator[dict]:
    base = {"id": "scripted", "object": "chat.completion.chunk", "created": int(time.time()), "model": MODEL}
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": reply}, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


def _handler(policy: Policy):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode())
            else:
                self._send(404, b'{"error": "not found"}')

        def do_POST(self) -> None:
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, b'{"error": "not found"}')
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            messages = [{"role": m.get("role", ""), "content": _text(m.get("content"))}
                        for m in body.get("messages", [])]
            reply = policy(messages)
            if body.get("stream"):
                events = "".join(f"data: {json.dumps(c)}\n\n" for c in _chunks(reply)) + "data: [DONE]\n\n"
                self._send(200, events.encode(), "text/event-stream")
            else:
                self._send(200, json.dumps(_completion(reply)).encode())
    return Handler


@contextmanager
def serving(policy: Policy) -> Iterator[str]:
    """``policy`` served on ``127.0.0.1``; yields its base URL (``http://127.0.0.1:PORT/v1``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(policy))
    thread = threading.Thread(target=server.serve_forever, name="trajkit-vf-policy", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
