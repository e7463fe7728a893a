"""``task.name=openenv``: RL on an OpenEnv environment, each episode's replies sampled through the gateway.

Prompt ``i`` is the episode seed drawn from ``(seed, i)``; the trainer repeats it ``G`` times (a group: the
same seed, so the same first observation). An episode (:func:`~trajkit.envs.openenv.episode.run_episode`) is
``reset(seed)`` on a fresh environment (``task.openenv.env=pkg.module:Class`` in this process, or a connection to the
local server ``task.openenv.url=ws://127.0.0.1:PORT``), then each observation rendered by the adapter as the user turn,
the policy's reply sampled by the gateway over the trainer's engine (:class:`trajkit.envs.agent.GatewayEnv`: at
the trainer's temperature, seeded from the step's seed, one session per episode), parsed into the action and
stepped, until ``done`` or ``task.openenv.max_turns`` replies. So:

- the **samples** are the gateway's stitched chains of the episode's chat calls (``loss_mask`` 1 on the sampled
  ids with the engine's log-probs; 0 on the observations and template glue between them);
- the **reward** is the episode's return (the sum of its step rewards; the rubric's where a step set none);
- an episode whose **environment fails** is unscorable (reward None: masked, out of its group's baseline); a
  reply that is not an action ends the episode with what it earned so far (the policy's fault).

``metadata["columns"]["harness_output"]`` of each sample holds the episode record as JSON (seed, reward,
rewards, done, turns, error).

``task.path=DIR`` puts a folder first on this process's import path before ``task.openenv.env`` and ``task.openenv.adapter``
are imported (an environment package beside the run, as ``task.path`` does for verifiers' venv).
"""
from __future__ import annotations

import sys
from pathlib import Path

import httpx

from trajkit.envs.openenv.connect import opener
from trajkit.envs.openenv.episode import Policy, adapter_for, run_episode
from trajkit.errors import ConfigError
from trajkit.models.chat import render
from trajkit.envs.agent import GatewayEnv, HarnessRun, gateway_config, record_reward
from trajkit.envs.imports import import_object
from trajkit.envs.base import ENDLESS, Prompt, encode, rng_for

EVAL_SEEDS = 64
CALL_TIMEOUT_S = 600.0  # one gateway call (a batch on a loaded CPU can take minutes)
FIRST_TURNS_KEPT = 4096  # first observations remembered (one reset per new seed, not per group member)


def chat_policy(client: httpx.Client, model: str) -> Policy:
    """A policy that asks an OpenAI-compatible ``/chat/completions`` through ``client`` (its base URL the
    gateway's, its bearer key the episode's session)."""
    def reply(messages: list[dict[str, str]]) -> str:
        r = client.post("chat/completions", json={"model": model, "messages": messages})
        if r.status_code != 200:
            raise RuntimeError(f"{client.base_url}chat/completions answered {r.status_code}: {r.text[:500]}")
        return r.json()["choices"][0]["message"].get("content") or ""
    return reply


class OpenEnvTask:
    """An OpenEnv environment as an RL task (module docstring)."""

    name = "openenv"

    def __init__(self, tokenizer, env: str | None = None, url: str | None = None, seed: int = 0, max_turns: int = 3,
                 adapter=None, system: str | None = None, gateway=None, action_field: str | None = None,
                 observation_field: str | None = None):
        self.connect = opener(env, url)
        self.adapter = adapter if adapter is not None else default_adapter(
            self.connect, action_field, observation_field, env or url)
        self.tokenizer, self.seed, self.max_turns, self.system = tokenizer, seed, max_turns, system
        self.env = GatewayEnv(tokenizer, self.episode, config=gateway, raise_when_all_fail=False, name=self.name)
        self.reward_funcs = [record_reward]
        self._first: dict[int, str] = {}

    def episode_seed(self, index: int, split: str) -> int:
        return index if split == "eval" else rng_for(self.seed, index, split).randrange(2 ** 31)

    def prompt(self, index: int, split: str = "train") -> Prompt:
        """The episode's first turn (the environment is reset once here to read its first observation)."""
        seed = self.episode_seed(index, split)
        if seed not in self._first:
            if len(self._first) >= FIRST_TURNS_KEPT:
                self._first.clear()
            conn = self.connect()
            try:
                self._first[seed] = self.adapter.render(conn.reset(seed)["observation"])
            finally:
                conn.close()
        messages = ([{"role": "system", "content": self.system}] if self.system else []) + \
            [{"role": "user", "content": self._first[seed]}]
        text = render(self.tokenizer, messages, add_generation_prompt=True)
        return Prompt(text, encode(self.tokenizer, text), index, {"openenv_seed": seed}, source=messages)

    def num_prompts(self, split: str) -> int:
        return EVAL_SEEDS if split == "eval" else ENDLESS

    def episode(self, run: HarnessRun) -> str:
        """One episode with the gateway as the policy -> its record (JSON)."""
        with httpx.Client(base_url=run.base_url.rstrip("/") + "/", timeout=CALL_TIMEOUT_S,
                          headers={"Authorization": f"Bearer {run.api_key}"}) as client:
            ep = run_episode(self.connect, self.adapter, chat_policy(client, run.model), run.columns["openenv_seed"],
                             self.max_turns, self.system)
        return ep.to_json()


def default_adapter(connect, action_field: str | None = None, observation_field: str | None = None,
                    env: str = "the environment"):
    """:class:`~trajkit.envs.openenv.episode.TextAdapter` on the action's one string field or ``action_field``
    (checked against the action's schema: read from the environment in process, or from the server's
    ``/schema``)."""
    conn = connect()
    try:
        schema = _action_schema(conn)
    finally:
        conn.close()
    try:
        return adapter_for(schema, action_field, observation_field, env)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _action_schema(conn) -> dict:
    action_cls = getattr(conn, "action_cls", None)
    if action_cls is not None:
        return action_cls.model_json_schema()
    http = conn.url.replace("ws://", "http://", 1).removesuffix("/ws")
    r = httpx.get(f"{http}/schema", timeout=30)
    r.raise_for_status()
    return r.json()["action"]


def add_import_path(path: str | None) -> None:
    """``task.path``: the folder goes first on ``sys.path`` (once)."""
    if path is None:
        return
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise ConfigError(f"task.path={path}: not a folder (for task.name=openenv it is added to the import path "
                          "before task.openenv.env and task.openenv.adapter are imported)")
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


def make_task(cfg, seed: int, tokenizer) -> OpenEnvTask:
    """The ``openenv`` entry of :data:`trajkit.envs.registry.TASKS`."""
    add_import_path(cfg.path)
    o = cfg.options
    adapter = import_object(o.adapter, "task.openenv.adapter") if o.adapter else None
    if isinstance(adapter, type):
        adapter = adapter()
    return OpenEnvTask(tokenizer, o.env, o.url, seed, o.max_turns, adapter, o.system_prompt,
                       gateway=gateway_config(o), action_field=o.action_field,
                       observation_field=o.observation_field)
