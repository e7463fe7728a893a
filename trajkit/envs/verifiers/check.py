"""``trajkit envs check --verifiers TASKSET``: is a verifiers taskset's rubric sound before anyone trains on it?

The OpenEnv check's rule (:mod:`trajkit.envs.openenv.check`, the same verdicts and probes) on verifiers'
own episodes: tasks ``0 .. episodes-1`` are each played by verifiers (the taskset, its ``null`` harness, the
``subprocess`` runtime, run by :mod:`trajkit.envs.verifiers.driver` in the verifiers venv) with a scripted
policy as the model: the policy ``(messages) -> reply`` is served as an OpenAI-compatible chat endpoint on a
loopback port (:mod:`trajkit.envs.verifiers.policy_server`) and verifiers' ``EvalClient`` forwards the harness's
calls to it, so the reply reaches the rubric exactly as a model's would. The reference (a scripted solver) must
earn ``pass_reward`` on every task, the NOP (an empty reply) 0, and with ``adversarial`` the probes ``echo``
(the prompt sent back), ``shotgun`` (every integer -10..100 and yes/no/true/false), ``claim`` (JSON and prose
claiming success) and ``overlong`` (20,000 characters) must earn 0. An episode whose scoring failed (the rubric
raised, no reward recorded) counts as the environment's error (``env error`` under the reference).

The ``seed`` of a row's detail is the task's index. All the policies play at once, each ``jobs`` episodes at a time.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass

from trajkit.envs.openenv.check import PROBES, EnvCheckRow, judge
from trajkit.envs.openenv.episode import Policy, nop
from trajkit.envs.verifiers.policy_server import MODEL, serving
from trajkit.envs.verifiers.process import Driver

EPISODE_TIMEOUT_S = 600.0


@dataclass
class Played:
    """One episode's outcome: the task's index (``seed``), its reward (None: unscorable) and error."""

    seed: int
    reward: float | None
    error: str | None
    replies: list[str]


def play(driver: Driver, env: dict, policy: Policy, tasks: range, label: str, jobs: int = 4) -> list[Played]:
    """``policy`` as the model of one verifiers episode per task in ``tasks`` of the environment ``env``."""
    with serving(policy) as url:
        def one(idx: int) -> Played:
            rec = driver.request("rollout", timeout=EPISODE_TIMEOUT_S, env=env, task=idx,
                                 session=f"check-{label}-{idx}", model=MODEL, sampling={},
                                 client={"type": "eval", "base_url": url, "api_key_var": "TRAJKIT_CHECK_API_KEY"})
            return Played(idx, rec["reward"], rec["error"], rec["replies"])
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(one, tasks))


def check_taskset(taskset: str, reference: Policy, episodes: int = 8, pass_reward: float = 1.0,
                  adversarial: bool = False, config: dict | None = None, path: str | None = None,
                  max_turns: int | None = 8, jobs: int = 4, driver: Driver | None = None) -> EnvCheckRow:
    """The verdict on the verifiers taskset ``taskset`` (module docstring); ``driver``: a running driver to use
    (else one is started and closed here). Every policy's episodes run at once, ``jobs`` per policy."""
    start = time.perf_counter()
    env = {"taskset": taskset, "config": config or {}, "max_turns": max_turns}
    with ExitStack() as stack:
        if driver is None:
            driver = stack.enter_context(Driver(path))
        size = driver.request("tasks", env=env, start=0, count=episodes)["size"]
        tasks = range(min(episodes, size) if size is not None else episodes)
        policies = {"reference": reference, "nop": nop, **(PROBES if adversarial else {})}
        with ThreadPoolExecutor(max_workers=len(policies)) as pool:
            runs = {name: pool.submit(play, driver, env, policy, tasks, f"{name}-{id(env)}", jobs)
                    for name, policy in policies.items()}
            played = {name: run.result() for name, run in runs.items()}
    probes = {name: played[name] for name in PROBES} if adversarial else None
    row = judge(taskset, played["reference"], played["nop"], pass_reward, probes)
    row.seconds = time.perf_counter() - start
    return row
