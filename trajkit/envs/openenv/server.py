"""A local OpenEnv server for an environment class: OpenEnv's own ``create_fastapi_app`` under uvicorn on a
loopback port (the web UI off: no gradio), for tests, ``envs check`` and ``task.openenv.url`` runs.

    python -m trajkit.envs.openenv.server trajkit.envs.openenv.examples:GuessEnv --port 8011
    trajkit train grpo_smollm2 task.name=openenv task.openenv.url=ws://127.0.0.1:8011
"""
from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

from trajkit.envs.imports import import_object


def app_for(env_cls, max_concurrent_envs: int = 64):
    """OpenEnv's FastAPI app for ``env_cls`` (its action and observation classes read from its type hints)."""
    import typing

    from openenv.core.env_server.http_server import create_fastapi_app

    hints_step = typing.get_type_hints(env_cls.step)
    action_cls, observation_cls = hints_step["action"], hints_step["return"]
    concurrent = max_concurrent_envs if getattr(env_cls, "SUPPORTS_CONCURRENT_SESSIONS", False) else 1
    return create_fastapi_app(env_cls, action_cls, observation_cls, max_concurrent_envs=concurrent)


@contextmanager
def serving(env_cls, max_concurrent_envs: int = 64, port: int = 0) -> Iterator[str]:
    """Serve ``env_cls`` in a thread on 127.0.0.1 (``port`` 0: a free one); yields ``ws://127.0.0.1:PORT``."""
    from trajkit.gateway.server import serving_in_thread, uvicorn_server

    with serving_in_thread(uvicorn_server(app_for(env_cls, max_concurrent_envs), "warning"), port=port) as root:
        yield "ws://" + root.removeprefix("http://")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Serve an OpenEnv environment class on a loopback port.",
                                epilog="Example:\n  python -m trajkit.envs.openenv.server "
                                       "trajkit.envs.openenv.examples:GuessEnv --port 8011",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("env", help="the environment class, pkg.module:Class")
    p.add_argument("--port", type=int, default=8011)
    p.add_argument("--max-concurrent", type=int, default=64, help="WebSocket sessions at once (default 64)")
    args = p.parse_args(argv)
    from trajkit.gateway.server import uvicorn_server

    server = uvicorn_server(app_for(import_object(args.env, "env"), args.max_concurrent))
    server.config.host, server.config.port = "127.0.0.1", args.port
    server.run()


if __name__ == "__main__":
    main()
