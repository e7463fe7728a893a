"""One OpenEnv episode driven by a text policy: ``reset`` -> (observation as the user turn -> reply -> action ->
``step``) until ``done`` or ``max_turns`` replies.

The **adapter** is the declared bridge between a chat model and an environment's typed actions and
observations (``task.openenv.adapter=pkg.module:obj``, any object with these two methods):

- ``render(observation: dict) -> str``: the user turn for an observation's fields;
- ``parse(reply: str) -> dict``: the action's fields from the model's reply (raise ``ValueError`` when the
  reply is not an action: the episode ends there, its return what the steps before it earned).

:class:`TextAdapter`, the default, fits the common text environment: the observation's one text field (or the
named ``observation_field``, ``task.openenv.observation_field``; else all its fields as JSON, said once in the log with
the fields it could show instead) and an action with one text field (or the named ``action_field``,
``task.openenv.action_field``) that receives the whole reply.

The **return** of an episode is the sum of its steps' rewards (a step without a reward adds the rubric's
when the environment in process has one, else 0), as OpenEnv's trajectory rubrics and TRL's OpenEnv
rollouts count it. An episode whose environment fails (raises, its server answers an error or goes away)
has no return (``None``: unscorable, masked by the trainer) and its ``error`` says why.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from trajkit.envs.openenv.connect import ActionError, Connection, EnvError

TEXT_FIELDS = ("prompt", "text", "message", "content", "question", "feedback")

log = logging.getLogger("trajkit.envs.openenv")

# a policy: the chat so far (user turns = observations, assistant turns = its replies) -> its next reply
Policy = Callable[[list[dict[str, str]]], str]


def nop(messages: list[dict[str, str]]) -> str:
    """The NOP policy: an empty reply."""
    return ""


@dataclass
class TextAdapter:
    """Observation -> its text field (``observation_field``, or the only string field, or a known name);
    reply -> ``{action_field: reply}`` (``action_field``: set from the action's schema when it has one string
    field). ``TextAdapter(action_field="message")`` fits OpenEnv's echo environment. ``env``: the environment's
    name, for the one warning :meth:`render` logs when it falls back to JSON."""

    action_field: str = "message"
    observation_field: str | None = None
    env: str = "the environment"
    warned: bool = field(default=False, repr=False, compare=False)

    def render(self, observation: dict[str, Any]) -> str:
        if self.observation_field is not None:
            if self.observation_field not in observation:
                self._warn_once(f"its observation has no field {self.observation_field!r} "
                                f"(task.openenv.observation_field; fields: {', '.join(sorted(observation)) or 'none'}): "
                                "the user turn is empty")
            return str(observation.get(self.observation_field, ""))
        texts = {k: v for k, v in observation.items() if isinstance(v, str)}
        if len(texts) == 1:
            return next(iter(texts.values()))
        named = [texts[k] for k in TEXT_FIELDS if texts.get(k)]
        if named:
            return "\n\n".join(named)
        self._warn_once(_json_fallback(texts, observation))
        return json.dumps(observation, ensure_ascii=False, sort_keys=True)

    def _warn_once(self, what: str) -> None:
        if not self.warned:
            self.warned = True
            log.warning("OpenEnv %s: %s", self.env, what)

    def parse(self, reply: str) -> dict[str, Any]:
        return {self.action_field: reply}


def _json_fallback(texts: dict[str, str], observation: dict[str, Any]) -> str:
    if texts:
        return (f"its observation has {len(texts)} string fields ({', '.join(sorted(texts))}) and none is one of "
                f"{', '.join(TEXT_FIELDS)}: the user turn is the observation's JSON; to show one field set "
                f"task.openenv.observation_field (e.g. task.openenv.observation_field={sorted(texts)[0]}), or give task.openenv.adapter")
    return (f"its observation has no string field ({', '.join(sorted(observation)) or 'no fields'}): the user turn "
            "is the observation's JSON; set task.openenv.observation_field=NAME or give task.openenv.adapter to render it")


def adapter_for(action_schema: dict[str, Any] | None, action_field: str | None = None,
                observation_field: str | None = None, env: str = "the environment") -> TextAdapter:
    """The default adapter for an action JSON schema: its one string field (or ``action_field``, which must be
    one of its fields) receives the reply."""
    props = (action_schema or {}).get("properties", {})
    if action_field is not None and action_schema is not None and action_field not in props:
        raise ValueError(f"task.openenv.action_field={action_field}: the action has no such field "
                         f"(fields: {', '.join(props) or 'none'})")
    if action_field is None and action_schema is not None:
        text = [k for k, v in props.items() if v.get("type") == "string" and k != "metadata"]
        if len(text) != 1:
            raise ValueError(f"the action has {len(text)} string fields ({', '.join(text) or 'none'}); name the one "
                             "the reply goes in (task.openenv.action_field=NAME) or give an adapter (task.openenv.adapter)")
        action_field = text[0]
    return TextAdapter(action_field or "message", observation_field, env)


@dataclass
class Episode:
    """What one episode did: ``reward`` (the return; None when the environment failed), the per-step
    ``rewards``, ``done``, ``turns`` (replies), the ``error`` that ended it (``env: …`` or ``action: …``) and
    its ``cause`` (``"env"``: the environment's, masked and counted in ``env/failed``; ``"action"``: the
    reply's, scored)."""

    seed: int
    reward: float | None = 0.0
    rewards: list[float] = field(default_factory=list)
    done: bool = False
    turns: int = 0
    error: str | None = None
    cause: str | None = None  # "env": the environment failed (masked, counted in env/failed); "action": the reply

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def run_episode(connect: Callable[[], Connection], adapter, policy: Policy, seed: int, max_turns: int,
                system: str | None = None) -> Episode:
    """Play one episode of a fresh connection with ``policy`` (module docstring); the connection is closed."""
    ep = Episode(seed)
    try:
        conn = connect()
    except EnvError as exc:
        return Episode(seed, reward=None, error=f"env: {exc}", cause="env")
    try:
        _play(conn, adapter, policy, ep, max_turns, system)
    except EnvError as exc:
        ep.reward, ep.error, ep.cause = None, f"env: {exc}", "env"
    finally:
        conn.close()
    return ep


def _play(conn: Connection, adapter, policy: Policy, ep: Episode, max_turns: int, system: str | None) -> None:
    result = conn.reset(ep.seed)
    messages = [{"role": "system", "content": system}] if system else []
    while not result["done"] and ep.turns < max_turns:
        messages.append({"role": "user", "content": adapter.render(result["observation"])})
        reply = policy(list(messages))
        messages.append({"role": "assistant", "content": reply})
        ep.turns += 1
        try:
            action = adapter.parse(reply)
            result = conn.step(action)
        except (ActionError, ValueError) as exc:
            ep.error, ep.cause = f"action: {exc}", "action"
            break
        reward = result["reward"]
        if reward is None:
            reward = conn.rubric_reward(action, result)
        ep.rewards.append(float(reward or 0.0))
    ep.done = bool(result["done"])
    ep.reward = sum(ep.rewards, 0.0)
