"""The verifiers side of ``task.name=verifiers`` and ``envs check --verifiers``: runs in the verifiers venv
(``make verifiers-venv``) and imports nothing of trajkit. ``python driver.py``

One long-lived process: it loads each ``verifiers.v1`` environment it is asked for once (a taskset by id and
config, verifiers' ``null`` harness, the ``subprocess`` runtime; never the cloud default) and keeps its
interception server up (``Env.serving()``) until it exits. It answers JSON lines on stdin, one JSON line each on
stdout, concurrently (asyncio; each answer carries its request's ``id``). ``env`` names the environment:
``{"taskset": "vf-sum", "config": {...}, "max_turns": 3}``.

- ``{"id": 1, "op": "tasks", "env": {...}, "start": 0, "count": 4}`` -> ``{"id": 1, "tasks": [{"idx",
  "prompt", "system_prompt"}, ...], "size": N or null}`` (``size`` null: an infinite taskset);
- ``{"id": 2, "op": "rollout", "env": {...}, "task": 3, "session": "run-1-0", "model": "policy",
  "client": {...}, "sampling": {"max_tokens": 32}}`` -> ``{"id": 2, "reward": 1.0 or null, "rewards": {name:
  weighted value}, "metrics": {...}, "replies": [assistant texts], "turns": N, "error": str or null}``.
  ``client`` is a verifiers client config: ``{"type": "train", "base_url": gateway, "renderer_model_name":
  tokenizer folder, "renderer": {...}}`` (``TrainClient``: token ids over ``/inference/v1/generate``) or
  ``{"type": "eval", "base_url": ...}`` (``EvalClient``: chat completions, used by ``envs check``);
- a request that fails is answered ``{"id": N, "failed": "Type: message", "traceback": ...}``;
- ``{"op": "close"}`` or end of input: tear the environments down and exit.

The rollout's trace id is set to ``session`` when the trace is minted (``on_trace``, before the harness runs):
verifiers sends the trace id as ``X-Session-ID`` on every model call, so the gateway records the episode's calls
in the session trajkit opened for it (with its forced sampling), and a stale or foreign session cannot be mixed
in. The reward is the trace's (the weighted sum of its ``@vf.reward``s); ``null`` when scoring did not run or
raised (unscorable), with ``error`` saying why. ``$TRAJKIT_VF_SCRIPTS`` is the folder verifiers writes harness
scripts to (shared by every driver, so uv keeps one environment per script).
"""
import asyncio
import contextlib
import json
import logging
import os
import sys
import traceback

from verifiers.v1 import ModelContext, SamplingConfig, load_environment, resolve_env_config
from verifiers.v1.clients import EvalClientConfig, TrainClientConfig
from verifiers.v1.env import RunSlot
from verifiers.v1.runtimes.subprocess import SubprocessRuntime


class Loaded:
    """One loaded environment and the tasks read from its taskset so far."""

    def __init__(self, env):
        self.env = env
        self.taskset = env.taskset
        self._tasks: list = []
        self._iter = iter(self.taskset)
        self._exhausted = False

    def task(self, idx: int):
        while len(self._tasks) <= idx and not self._exhausted:
            try:
                self._tasks.append(next(self._iter))
            except StopIteration:
                self._exhausted = True
        if idx >= len(self._tasks):
            raise IndexError(f"taskset has {len(self._tasks)} tasks; task {idx} does not exist")
        return self._tasks[idx]

    def size(self) -> int | None:
        if not self.taskset.bounded:
            return None
        while not self._exhausted:
            try:
                self._tasks.append(next(self._iter))
            except StopIteration:
                self._exhausted = True
        return len(self._tasks)

    def tasks(self, start: int, count: int) -> dict:
        size = self.size()
        stop = start + count if size is None else min(size, start + count)
        out = []
        for i in range(start, stop):
            data = self.task(i).data
            prompt = data.prompt if isinstance(data.prompt, str) or data.prompt is None else \
                [m.model_dump(mode="json", exclude_none=True) for m in data.prompt]
            out.append({"idx": i, "prompt": prompt, "system_prompt": data.system_prompt})
        return {"tasks": out, "size": size}


class Driver:
    """The environments asked for so far, each loaded once (``Env.serving()`` held until the driver exits)."""

    def __init__(self, stack: contextlib.AsyncExitStack):
        self.stack = stack
        self.envs: dict[str, Loaded] = {}
        self._lock = asyncio.Lock()

    async def loaded(self, spec: dict) -> Loaded:
        key = json.dumps(spec, sort_keys=True)
        async with self._lock:
            if key not in self.envs:
                config = env_config(spec["taskset"], spec.get("config") or {}, spec.get("max_turns"))
                env = load_environment(resolve_env_config(config))
                await self.stack.enter_async_context(env.serving())
                self.envs[key] = Loaded(env)
            return self.envs[key]

    async def tasks(self, req: dict) -> dict:
        return (await self.loaded(req["env"])).tasks(int(req.get("start", 0)), int(req.get("count", 1)))

    async def rollout(self, req: dict) -> dict:
        loaded = await self.loaded(req["env"])
        task = loaded.task(int(req["task"]))
        client = req["client"]
        cls = TrainClientConfig if client.get("type", "train") == "train" else EvalClientConfig
        ctx = ModelContext(model=req["model"], client=cls.model_validate(client),
                           sampling=SamplingConfig.model_validate(req.get("sampling") or {}))
        session = req["session"]

        def minted(trace) -> None:
            trace.id = session  # the gateway's session: X-Session-ID is the trace id (module docstring)

        episode = await loaded.env.run_slot(RunSlot(task), ctx, on_trace=minted)
        return episode_record(episode)


def episode_record(episode) -> dict:
    trace = episode.traces[-1] if episode.traces else None
    errors = [f"{e.type}: {e.message}" for e in episode.errors]
    if trace is None:
        return {"reward": None, "rewards": {}, "metrics": {}, "replies": [], "turns": 0,
                "error": "; ".join(errors) or "the episode ran no agent"}
    errors += [f"{e.type}: {e.message}" for e in trace.errors]
    rewards = {k: (None if r is None else r.value) for k, r in trace.rewards.items()}
    replies = [m.content if isinstance(m.content, str) else json.dumps(m.content, default=str) if m.content else ""
               for m in trace.assistant_messages]
    scored = bool(rewards) and all(v is not None for v in rewards.values())
    return {"reward": sum(rewards.values()) if scored else None, "rewards": rewards,
            "metrics": dict(trace.metrics), "replies": replies, "turns": len(replies),
            "error": "; ".join(errors) or (None if scored else "the taskset recorded no reward")}


async def serve(driver: Driver) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    pending: set[asyncio.Task] = set()

    def answer(rid, body: dict) -> None:
        sys.stdout.write(json.dumps({"id": rid, **body}) + "\n")
        sys.stdout.flush()

    async def handle(req: dict) -> None:
        rid = req.get("id")
        try:
            if req["op"] == "tasks":
                answer(rid, await driver.tasks(req))
            elif req["op"] == "rollout":
                answer(rid, await driver.rollout(req))
            else:
                answer(rid, {"failed": f"unknown op {req['op']!r}"})
        except Exception as exc:  # noqa: BLE001 - one bad request is one error answer, never the driver
            answer(rid, {"failed": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]})

    while line := await reader.readline():
        req = json.loads(line)
        if req.get("op") == "close":
            break
        task = asyncio.ensure_future(handle(req))
        pending.add(task)
        task.add_done_callback(pending.discard)
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)


def env_config(taskset: str, config: dict, max_turns: int | None) -> dict:
    agent = {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}
    if max_turns is not None:
        agent["max_turns"] = max_turns
    return {"taskset": {**config, "id": taskset}, "agent": agent}


async def main() -> None:
    scripts = os.environ.get("TRAJKIT_VF_SCRIPTS")
    if scripts:  # one folder for every driver: uv keys a script's environment by the script's path
        SubprocessRuntime.scripts_dir = scripts
    async with contextlib.AsyncExitStack() as stack:
        sys.stdout.write(json.dumps({"id": None, "ready": True}) + "\n")
        sys.stdout.flush()
        await serve(Driver(stack))


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(main())
