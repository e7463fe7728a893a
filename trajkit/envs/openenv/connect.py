"""One OpenEnv episode's connection: the environment in this process, or a local server over its ``/ws`` socket.

Both speak plain dicts, the shape of OpenEnv's wire format (``openenv.core.env_server.serialization``): ``reset``
and ``step`` return ``{"observation": {...fields...}, "reward": float | None, "done": bool}`` and ``step`` takes
the action's fields. In process, the dict is validated into the environment's action class (``step``'s type
hint) and the observation is serialized the way the server does it, so an adapter or a policy sees the same
thing either way.

The HTTP ``/reset`` and ``/step`` routes of an OpenEnv server build a fresh environment per request, so an
episode of more than one step runs over the WebSocket ``/ws`` (one environment per connection; messages
``{"type": "reset"|"step"|"state"|"close", "data": …}``, answers ``{"type": "observation"|"state"|"error",
"data": …}``). Only loopback addresses are accepted: nothing reaches the network.
"""
from __future__ import annotations

import json
import typing
from typing import Any, Protocol
from urllib.parse import urlsplit

from trajkit.errors import ConfigError
from trajkit.envs.imports import import_object


class EnvError(RuntimeError):
    """The environment failed (raised, refused an action, or its server answered an error): not the policy's fault."""


class ActionError(ValueError):
    """The policy's reply is not an action the environment accepts (its fault: the episode ends there)."""


class Connection(Protocol):
    def reset(self, seed: int) -> dict[str, Any]: ...

    def step(self, action: dict[str, Any]) -> dict[str, Any]: ...

    def rubric_reward(self, action: dict[str, Any], result: dict[str, Any]) -> float | None: ...

    def close(self) -> None: ...


def _serialize(observation) -> dict[str, Any]:
    fields = observation.model_dump(exclude={"reward", "done", "metadata"})
    return {"observation": fields, "reward": observation.reward, "done": bool(observation.done)}


class InProcess:
    """``factory()`` -> an ``openenv`` ``Environment``, stepped in this process."""

    def __init__(self, factory, action_cls=None):
        self.env = factory()
        self.action_cls = action_cls or action_class(self.env)
        self._last = self._observation = None  # the last step's action and observation (for the rubric)

    def reset(self, seed: int) -> dict[str, Any]:
        try:
            return _serialize(self.env.reset(seed=seed))
        except Exception as exc:  # noqa: BLE001 - the env's own failure, named
            raise EnvError(f"{type(self.env).__name__}.reset(seed={seed}): {type(exc).__name__}: {exc}") from exc

    def step(self, action: dict[str, Any]) -> dict[str, Any]:
        try:
            self._last = self.action_cls.model_validate(action)
        except Exception as exc:  # pydantic's ValidationError: the reply's fields do not fit the action
            raise ActionError(f"not a {self.action_cls.__name__}: {exc}") from None
        try:
            observation = self.env.step(self._last)
        except Exception as exc:  # noqa: BLE001
            raise EnvError(f"{type(self.env).__name__}.step: {type(exc).__name__}: {exc}") from exc
        self._observation = observation
        return _serialize(observation)

    def rubric_reward(self, action: dict[str, Any], result: dict[str, Any]) -> float | None:
        """The environment's rubric on the last step, when the step set no reward itself."""
        rubric = getattr(self.env, "rubric", None)
        if rubric is None or self._last is None:
            return None
        return float(rubric(self._last, self._observation))

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if callable(close):
            close()


# what a session the server closes at once most often means, and the fix
SESSION_LIMIT = ("An OpenEnv server serves at most max_concurrent_envs sessions at once (create_app's default: 1) "
                 "and refuses the others by closing them; a training step opens up to rollout.prompts_per_step x "
                 "rollout.group_size episodes at once (64 at most). Serve the environment with max_concurrent_envs "
                 "at least that (python -m trajkit.envs.openenv.server ENV --max-concurrent N, or "
                 "create_app(..., max_concurrent_envs=N) with SUPPORTS_CONCURRENT_SESSIONS = True on the class), or "
                 "lower rollout.prompts_per_step x rollout.group_size.")


class Socket:
    """One episode on a local OpenEnv server's ``/ws`` (a connection is one environment on the server)."""

    def __init__(self, url: str, timeout_s: float = 60.0):
        from websockets.sync.client import connect  # openenv-core's own dependency: loaded only here

        self.url = ws_url(url)
        self.timeout_s = timeout_s
        try:
            self._connect = connect(self.url, open_timeout=timeout_s, max_size=None)
            self.ws = self._connect.__enter__()
        except OSError as exc:
            raise EnvError(f"task.openenv.url: cannot connect to {self.url} ({exc}); is the OpenEnv server running?") from exc

    def _ask(self, kind: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        from websockets.exceptions import ConnectionClosed

        try:
            self.ws.send(json.dumps({"type": kind, "data": data or {}}))
            answer = json.loads(self.ws.recv(timeout=self.timeout_s))
        except ConnectionClosed as exc:
            raise EnvError(f"{self.url} closed the session before answering {kind} ({type(exc).__name__}: {exc}). "
                           f"{SESSION_LIMIT}") from None
        if answer.get("type") == "error":
            err = answer.get("data") or {}
            message = f"{self.url} {kind}: {err.get('message', err)}"
            if err.get("errors"):
                message += " " + json.dumps(err["errors"], default=str)[:1000]
            if kind == "step" and str(err.get("code", "")).upper().startswith("VALIDATION"):
                raise ActionError(message)
            if "capacity" in str(err.get("message", "")).lower():  # openenv-core: "Server at capacity: 1/1 ..."
                message += f". {SESSION_LIMIT}"
            raise EnvError(message)
        return answer["data"]

    def reset(self, seed: int) -> dict[str, Any]:
        return self._ask("reset", {"seed": seed})

    def step(self, action: dict[str, Any]) -> dict[str, Any]:
        return self._ask("step", action)

    def rubric_reward(self, action, result) -> None:
        return None  # a server's rubric runs inside its step: the reward it sends is the rubric's

    def close(self) -> None:
        """Tell the server the session ends, then close (as openenv's own ``EnvClient.disconnect`` does)."""
        try:
            self.ws.send(json.dumps({"type": "close", "data": {}}))
        except Exception:  # noqa: BLE001 - the server may have gone already; closing is best effort
            pass
        self._connect.__exit__(None, None, None)


def ws_url(url: str) -> str:
    """``ws://127.0.0.1:PORT/ws`` for a loopback ``ws://``, ``http://`` or bare ``host:port`` address."""
    parts = urlsplit(url if "://" in url else f"ws://{url}")
    if parts.scheme not in ("ws", "http") or parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise ConfigError(f"task.openenv.url: {url!r} is not a loopback ws://127.0.0.1:PORT address (a local OpenEnv "
                          "server; remote hubs and Docker images are not reached from here)")
    path = parts.path.rstrip("/")
    return f"ws://{parts.netloc}{path if path.endswith('/ws') else path + '/ws'}"


def action_class(env):
    """The action model an environment's ``step`` takes (its type hint)."""
    try:
        hint = typing.get_type_hints(type(env).step).get("action")
    except Exception:  # noqa: BLE001 - an unresolvable forward reference: said below
        hint = None
    if hint is None or not hasattr(hint, "model_validate"):
        raise ConfigError(f"task.openenv.env: {type(env).__name__}.step(action) has no pydantic Action type hint; annotate "
                          "it (def step(self, action: MyAction, ...)) so replies can be validated into it")
    return hint


def opener(env: str | None, url: str | None, timeout_s: float = 60.0):
    """A function ``() -> Connection`` for ``task.openenv.env`` (``pkg.module:Class``, in process) or ``task.openenv.url``."""
    if (env is None) == (url is None):
        raise ConfigError("task.name=openenv needs exactly one of task.openenv.env=pkg.module:Class (in process) or "
                          "task.openenv.url=ws://127.0.0.1:PORT (a local OpenEnv server)")
    if url is not None:
        ws_url(url)  # checked now, not at the first episode
        return lambda: Socket(url, timeout_s)
    factory = import_object(env, "task.openenv.env")
    if not callable(factory):
        raise ConfigError(f"task.openenv.env: {env!r} is not a class or factory of an OpenEnv Environment")
    return lambda: InProcess(factory)
