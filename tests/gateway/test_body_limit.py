"""A request body is read up to the gateway's limit (``MAX_BODY_BYTES``, 32 MiB) and no further: a declared
``Content-Length`` over it is 413 before any byte is read, a chunked one is refused once it passes the limit.
Real uvicorn on loopback over a stub gateway whose handlers record what reached them."""
import socket
from types import SimpleNamespace

import pytest

from trajkit.gateway.access import Access
from trajkit.gateway.app import MAX_BODY_BYTES, create_app
from trajkit.gateway.server import serving_in_thread, uvicorn_server
from trajkit.gateway.sessions import SessionStore

ROUTES = ["/v1/chat/completions", "/v1/completions", "/inference/v1/generate"]


@pytest.fixture(scope="module")
def served():
    store = SessionStore()
    session = store.open("run-1-0", "m")
    seen = []

    async def handler(body, sid, live=None):
        seen.append(sid)
        return {"ok": sid}

    gw = SimpleNamespace(access=Access(store, locked=True), sessions=store, chat=handler, completion=handler,
                         generate=handler, models_list=lambda: {"data": []}, scheduler=SimpleNamespace(calls=0),
                         engine=SimpleNamespace(policy_version=0))
    with serving_in_thread(uvicorn_server(create_app(gw), "error")) as url:
        host, port = url.split("//")[1].split(":")
        yield (host, int(port.split("/")[0])), session.key.encode(), seen


def _head(route: str, key: bytes, framing: bytes) -> bytes:
    return (b"POST " + route.encode() + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key +
            b"\r\nContent-Type: application/json\r\n" + framing + b"\r\n")


def _reply(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    out = b""
    try:
        while b"\r\n\r\n" not in out or b"}" not in out.split(b"\r\n\r\n", 1)[1]:
            data = sock.recv(65536)
            if not data:
                break
            out += data
    except OSError:
        pass
    return out


@pytest.mark.parametrize("route", ROUTES)
def test_a_declared_length_over_the_limit_is_413_before_reading(served, route):
    addr, key, seen = served
    before = len(seen)
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(_head(route, key, b"Content-Length: %d\r\n" % (2 * MAX_BODY_BYTES)))  # no body is sent
        out = _reply(s)
    assert out.startswith(b"HTTP/1.1 413"), out[:200]
    assert b"request_too_large" in out and str(MAX_BODY_BYTES).encode() in out
    assert len(seen) == before


def test_a_chunked_body_over_the_limit_is_refused_once_past_it(served):
    addr, key, seen = served
    before = len(seen)
    chunk = b" " * (1 << 20)
    frame = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(_head(ROUTES[0], key, b"Transfer-Encoding: chunked\r\n"))
        try:
            for _ in range(2 * MAX_BODY_BYTES // len(chunk)):
                s.sendall(frame)
            s.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server stopped reading and closed: the refusal below says why
        out = _reply(s)
    assert out.startswith(b"HTTP/1.1 413"), out[:200]
    assert b"request_too_large" in out
    assert len(seen) == before


def test_a_body_under_the_limit_still_reaches_the_handler(served):
    addr, key, seen = served
    before = len(seen)
    body = b'{"model": "m", "messages": [], "pad": "' + b"x" * (1 << 20) + b'"}'
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(_head(ROUTES[0], key, b"Content-Length: %d\r\n" % len(body)) + body)
        out = _reply(s)
    assert out.startswith(b"HTTP/1.1 200"), out[:200]
    assert len(seen) == before + 1
