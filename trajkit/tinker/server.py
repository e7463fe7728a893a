"""Running the Tinker server: ``load_service`` (model folder -> service), ``serve`` (blocking, what
``trajkit serve --api tinker`` calls) and ``running`` (a loopback server in a thread, for tests and the
benchmark). Both run on the gateway's uvicorn settings (:func:`trajkit.gateway.server.uvicorn_server`)."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from trajkit.gateway.server import bound_socket, serving_in_thread, uvicorn_server
from trajkit.tinker.service import TinkerService


def load_service(model: str, model_name: str | None = None, checkpoint_dir: str = "runs/tinker") -> TinkerService:
    """The service over the local HF folder ``model`` (tokenizer beside it), served as ``model_name`` (default:
    the folder's name), checkpoints under ``checkpoint_dir``."""
    from trajkit.models.load import load_model, load_tokenizer

    net = load_model(model, what="--model")
    tokenizer = load_tokenizer(model, what="--model")
    name = model_name or Path(model).resolve().name
    return TinkerService(net, tokenizer, name, str(Path(model).resolve()), checkpoint_dir)


def serve(service: TinkerService, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> None:
    """Serve ``service`` on ``host:port`` (0 = a free port) until interrupted; says the URL on stderr."""
    import sys

    from trajkit.tinker.app import create_app

    sock = bound_socket(host, port)  # TCP_NODELAY: no 40 ms wait per keep-alive request
    print(f"trajkit serve: Tinker API on http://{host}:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
    uvicorn_server(create_app(service), log_level).run(sockets=[sock])


@contextmanager
def running(service: TinkerService, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning") -> Iterator[str]:
    """Serve ``service`` in a thread; yields the base URL for ``tinker.ServiceClient(base_url=...)``."""
    from trajkit.tinker.app import create_app

    with serving_in_thread(uvicorn_server(create_app(service), log_level), host, port) as url:
        yield url
