"""``task.name=verifiers``: RL on a ``verifiers.v1`` taskset, its episodes run by verifiers against the gateway.

``task.verifiers.env=TASKSET_ID`` names the taskset as verifiers does (an importable package in the verifiers venv that
exports its ``Taskset``; ``task.path=DIR`` adds a folder to that venv's import path; trajkit's example
``vf-sum`` ships in ``trajkit/envs/verifiers/tasksets``); ``task.verifiers.env_config`` is a JSON object of its config
fields. The environment is verifiers' own: the taskset, its ``null`` harness (a chat loop, verifiers' PEP 723
script run with ``uv``, offline: :mod:`trajkit.envs.verifiers.process`) and the ``subprocess`` runtime (never the
remote default), run by :mod:`trajkit.envs.verifiers.driver` in the verifiers venv. Each episode:

1. the trainer's round opens a gateway session per group member (:class:`trajkit.envs.agent.GatewayEnv`: the
   round's temperature and seed forced, one session per episode, the engine's lock held per call);
2. the driver runs one verifiers episode of task ``i`` with ``TrainClient`` (``base_url`` = the gateway,
   ``renderer_model_name`` = the trainer's tokenizer folder, renderer ``default``: the tokenizer's own chat
   template), its trace id set to the session: the harness's model calls reach verifiers' interception server,
   which renders them to token ids and posts ``/inference/v1/generate`` to the gateway with ``X-Session-ID``
   = the session, so every call is recorded there, token for token;
3. the reward is the taskset's rubric (the trace's weighted ``@vf.reward`` sum), computed by verifiers;
   an episode whose scoring failed is unscorable (None: masked).

So the **samples** are the gateway's stitched chains of the session's generate calls (``loss_mask`` 1 on the
sampled ids with the engine's log-probs, 0 on what the renderer put between them), exactly as for the chat
route. ``metadata["columns"]["harness_output"]`` holds the episode's record (reward, rewards, metrics, replies,
turns, error). Prompt ``i`` (train) is task ``i mod N`` of a bounded taskset (task ``i`` of an infinite one);
eval reads the same tasks (a verifiers taskset has no held-out split of its own: give one with
``task.verifiers.env_config``, e.g. another ``size`` or seed, when the taskset has such a field).
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from trajkit.envs.agent import GatewayEnv, HarnessRun, gateway_config, record_reward
from trajkit.envs.base import ENDLESS, Prompt, encode
from trajkit.envs.verifiers.process import Driver, DriverError
from trajkit.errors import ConfigError
from trajkit.models.chat import render

CHUNK = 64  # tasks fetched from the driver per request
EVAL_TASKS = 64
RENDERER = {"name": "default"}  # renderers' DefaultRenderer: the tokenizer's own chat template
ROLLOUT_TIMEOUT_S = 3600.0


def tokenizer_folder(tokenizer, keep: list) -> str:
    """A folder the verifiers venv loads the trainer's tokenizer from: its own when it has one, else a copy
    saved to a temporary folder (kept alive in ``keep``)."""
    path = Path(str(getattr(tokenizer, "name_or_path", "") or ""))
    if path.is_dir() and (path / "tokenizer.json").exists():
        return str(path)
    tmp = tempfile.TemporaryDirectory(prefix="trajkit-vf-tokenizer-")
    keep.append(tmp)
    tokenizer.save_pretrained(tmp.name)
    return tmp.name


class VerifiersTask:
    """A verifiers taskset as an RL task (module docstring)."""

    name = "verifiers"

    def __init__(self, tokenizer, taskset: str, config: dict | None = None, max_turns: int | None = None,
                 path: str | None = None, gateway=None):
        self.tokenizer, self.taskset = tokenizer, taskset
        self._keep: list = []
        self.env = None
        self.driver = Driver(path)
        self.spec = {"taskset": taskset, "config": config or {}, "max_turns": max_turns}
        self.renderer_model = tokenizer_folder(tokenizer, self._keep)
        # a driver request fails only when the driver is broken (an episode's own failure is in its record):
        # a round in which every one failed raises
        self.env = GatewayEnv(tokenizer, self.episode, config=gateway, name=self.name)
        self.reward_funcs = [record_reward]
        self._tasks: dict[int, dict] = {}
        self.size = self._fetch(0)

    def _fetch(self, start: int) -> int | None:
        try:
            msg = self.driver.request("tasks", env=self.spec, start=start, count=CHUNK)
        except DriverError as exc:
            if start:
                raise
            self.close()
            reason = str(exc).split("failed: ", 1)[-1].splitlines()[0]
            raise ConfigError(f"task.verifiers.env={self.taskset}: verifiers could not load the taskset: {reason}") from None
        self._tasks.update({t["idx"]: t for t in msg["tasks"]})
        if msg["size"] == 0:
            raise ConfigError(f"task.verifiers.env={self.taskset}: the taskset has no tasks")
        return msg["size"]

    def task(self, idx: int) -> dict:
        if idx not in self._tasks:
            self._fetch(idx - idx % CHUNK)
        return self._tasks[idx]

    def prompt(self, index: int, split: str = "train") -> Prompt:
        idx = index % self.size if self.size else index
        t = self.task(idx)
        prompt = t["prompt"] if isinstance(t["prompt"], list) else [{"role": "user", "content": t["prompt"] or ""}]
        messages = ([{"role": "system", "content": t["system_prompt"]}] if t["system_prompt"] else []) + prompt
        text = render(self.tokenizer, messages, add_generation_prompt=True)
        return Prompt(text, encode(self.tokenizer, text), index, {"vf_task": idx}, source=messages)

    def num_prompts(self, split: str) -> int:
        if split == "eval":
            return min(EVAL_TASKS, self.size or EVAL_TASKS)
        return self.size or ENDLESS

    def episode(self, run: HarnessRun) -> str:
        """One verifiers episode whose model calls go to ``run``'s gateway session -> its record (JSON)."""
        session = self.env.gateway.sessions.find(run.session)
        budget = session.forced.max_tokens if session is not None and session.forced is not None else None
        # the run's key as a header of the client (it wins over the SDK's own Authorization): verifiers sends
        # the trace id (= the session id) as X-Session-ID, which the locked gateway checks against the key
        client = {"type": "train", "base_url": run.base_url, "api_key_var": "TRAJKIT_GATEWAY_API_KEY",
                  "headers": {"Authorization": f"Bearer {run.api_key}"},
                  "renderer_model_name": self.renderer_model, "renderer": RENDERER}
        record = self.driver.request("rollout", timeout=ROLLOUT_TIMEOUT_S, env=self.spec, task=run.columns["vf_task"],
                                     session=run.session, model=run.model, client=client,
                                     sampling={} if budget is None else {"max_tokens": budget})
        record.pop("id", None)
        if not record["turns"] and record["error"]:  # no call reached the gateway: nothing to train, say why
            raise RuntimeError(f"task {run.columns['vf_task']}: verifiers' episode failed before any model call: "
                               f"{record['error'][-2000:]}")
        return json.dumps(record)

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
        self.driver.close()
        for tmp in self._keep:
            tmp.cleanup()
        self._keep.clear()


def make_task(cfg, seed: int, tokenizer) -> VerifiersTask:
    """The ``verifiers`` entry of :data:`trajkit.envs.registry.TASKS`."""
    o = cfg.options
    try:
        config = json.loads(o.env_config) if o.env_config else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(f"task.verifiers.env_config must be a JSON object of the taskset's config fields: "
                          f"{exc}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"task.verifiers.env_config must be a JSON object, got {o.env_config!r}")
    return VerifiersTask(tokenizer, o.env, config, o.max_turns, cfg.path, gateway=gateway_config(o))
