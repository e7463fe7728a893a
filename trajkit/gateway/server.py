"""Running the gateway: ``serve`` (blocking, what ``trajkit serve`` calls), ``running`` (a server on a
loopback port in a background thread, for tests, benchmarks and the RL agent task) and ``load_gateway``
(model folder -> backend -> gateway)."""
from __future__ import annotations

import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from trajkit.errors import ConfigError
from trajkit.gateway.config import GatewayConfig
from trajkit.gateway.service import Gateway


def load_gateway(model: str, config: GatewayConfig, draft: str | None = None, drafter: str | None = None,
                 num_draft_tokens: int | str = 3, rope_scaling=None, spec=None) -> Gateway:
    """A gateway over the local model folder ``model`` (its tokenizer beside it), plain or speculative, built
    by the one backend builder (:func:`trajkit.backends.build.build_backend`; ``spec``: a whole
    :class:`~trajkit.backends.build.BackendSpec` instead of the keyword arguments, e.g. ``backend="vllm"``).
    ``rope_scaling`` (:class:`trajkit.models.rope.RopeScaling`, YaRN) extends the model's window, which the
    engine and the gateway then enforce and ``/v1/models`` reports as ``max_model_len``."""
    from trajkit.backends.build import BackendSpec, build_backend
    from trajkit.models.load import load_tokenizer

    if spec is None:
        spec = BackendSpec(model=model, draft=draft, drafter=drafter, k=num_draft_tokens, rope_scaling=rope_scaling)
    tokenizer = load_tokenizer(model, what="--model")
    return Gateway(build_backend(spec), tokenizer, config)


def _uvicorn(gateway: Gateway, log_level: str):
    from trajkit.gateway.app import create_app

    return uvicorn_server(create_app(gateway), log_level)


def uvicorn_server(app, log_level: str = "info"):
    """The uvicorn server of an ASGI ``app`` with the gateway's settings (no access log, 30 s keep-alive);
    the Tinker server (:mod:`trajkit.tinker.server`) runs on the same.

    Logging is set up once per process (:func:`_uvicorn_logging`), never by uvicorn: its default config runs
    ``logging.config.dictConfig`` for every server, which puts a handler writing to ``sys.stdout`` on the
    access logger before ``access_log=False`` takes it off again. Servers starting in several threads at
    once (concurrent trials, each with its gateway) left request lines in that window, and they landed in
    the stdout of the command that ran them (``trajkit envs check --json``)."""
    import uvicorn

    _uvicorn_logging()
    return uvicorn.Server(uvicorn.Config(app, log_level=log_level, access_log=False, timeout_keep_alive=30,
                                         log_config=None))


class _Stderr(logging.StreamHandler):
    """A handler writing to whatever ``sys.stderr`` is when a record comes (a test's capture, a redirect)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


_LOGGING_LOCK = threading.Lock()


def _uvicorn_logging() -> None:
    """uvicorn's server messages (start-up, errors) to stderr as its default config formats them: set once,
    before the first server, under a lock (each server's ``access_log=False`` keeps the access logger bare)."""
    with _LOGGING_LOCK:
        logger = logging.getLogger("uvicorn")
        if any(isinstance(h, _Stderr) for h in logger.handlers):
            return
        from uvicorn.logging import DefaultFormatter

        handler = _Stderr()
        handler.setFormatter(DefaultFormatter("%(levelprefix)s %(message)s", use_colors=False))
        logger.addHandler(handler)
        logger.propagate = False


def serve(gateway: Gateway, log_level: str = "info") -> None:
    """Serve on ``gateway.config.host:port`` until interrupted. SIGINT ends it with ``KeyboardInterrupt``,
    SIGTERM (``kill``, ``timeout``, systemd, ``docker stop``) with ``SystemExit(143)``: uvicorn shuts down
    gracefully, then re-raises the signal it caught, and without a handler of ours SIGTERM's default
    action would end the process before any caller's ``finally`` (the ``--save-dir`` save) could run."""
    server = _uvicorn(gateway, log_level)
    server.config.host, server.config.port = gateway.config.host, gateway.config.port
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if main else None
    try:
        server.run()
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
        gateway.close()


def _terminated(signum, _frame) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def running(gateway: Gateway, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning") -> Iterator[str]:
    """Serve ``gateway`` in a thread on ``host:port`` (0 = a free port); yields the base URL ``http://…/v1``."""
    with serving_in_thread(_uvicorn(gateway, log_level), host, port) as root:
        yield f"{root}/v1"


def bound_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` with ``TCP_NODELAY``, which Linux passes on to every accepted
    connection. Without it a keep-alive client's next request waits ~40 ms: the response goes out in two
    writes, Nagle holds the second until the first is ACKed, and the client delays that ACK (measured on
    loopback: 44 ms per request before, 1.5 ms after)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    return sock


@contextmanager
def serving_in_thread(server, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Run a uvicorn ``server`` in a thread on ``host:port`` (0 = a free port); yields ``http://host:port``."""
    sock = bound_socket(host, port)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        if not thread.is_alive() or time.time() > deadline:
            raise ConfigError("the server did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
