"""One trial of a Harbor task: a fresh sandbox, an agent, the task's tests, a reward.

The phases, each timed and logged in :class:`TrialResult` (Harbor's trial order):

1. ``sandbox``: start a sandbox from the task's ``[environment]`` and Dockerfile plan (:func:`sandbox_spec`);
2. ``agent``: the agent works under the workdir within ``[agent] timeout_sec``; ``/tests`` is not there yet
   (and ``/solution`` only for the Oracle);
3. ``verifier``: every process the agent left is gone (each ``exec`` ends with its namespace), ``/tests`` and
   ``/logs/verifier`` are made afresh from the host (whatever the agent left there, a planted reward or a
   symlink in their place, is gone), ``tests/`` is uploaded to ``/tests``, and ``bash /tests/test.sh`` runs
   within ``[verifier] timeout_sec`` with a clean environment (:data:`VERIFIER_ENV`: the system ``PATH``, no
   user site-packages, no script or working directory on ``sys.path``, no loader or startup variables from
   the image) and then ``[verifier] env``;
4. ``reward``: ``/logs/verifier/reward.json`` (a dict of finite numbers) is read first, else ``reward.txt``
   (one finite float); the script's exit code is ignored, as Harbor ignores it. No file, an empty one, a
   non-number or a non-finite value is an error naming the task, and the reward is 0;
5. the sandbox is stopped (always).

The trial's ``reward`` is the ``reward`` key of the dict when there is one, else the mean of its values (a
text reward is ``{"reward": x}``). Agents are plain callables ``(task, sandbox) -> AgentResult``:
:func:`oracle_agent` (runs ``solution/solve.sh``), :func:`nop_agent` (does nothing).
"""
from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trajkit.envs.harbor.dockerfile import parse_dockerfile
from trajkit.envs.sandbox.registry import make_sandbox
from trajkit.envs.sandbox.base import SYSTEM_PATH, ExecResult, Limits, Sandbox, SandboxSpec
from trajkit.envs.harbor.task import HarborTask, read_text
from trajkit.errors import TrajkitError

DEFAULT_WORKDIR = "/app"
MAX_LOG = 20000  # characters of each phase's output kept in a TrialResult


@dataclass
class AgentResult:
    """What an agent did: its command results (the last one decides ``timed_out``) and any output to keep."""

    results: list[ExecResult] = field(default_factory=list)
    output: str = ""
    error: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def timed_out(self) -> bool:
        return any(r.timed_out for r in self.results)


Agent = Callable[[HarborTask, Sandbox], AgentResult]


@dataclass
class TrialResult:
    """A finished trial: ``reward`` (0.0 on any error), the reward dict, ``error`` (None when the reward was
    read), which phase failed, per-phase ``seconds`` and ``logs``."""

    task: str
    agent: str
    reward: float = 0.0
    rewards: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    failed_phase: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    agent_result: AgentResult | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict:
        out = asdict(self)
        out.pop("agent_result")
        return out


def sandbox_spec(task: HarborTask, allow_run: bool = False, storage_mb: int | None = None) -> SandboxSpec:
    """The sandbox a task asks for: its limits, workdir and env; its Dockerfile's plan, or the plain files of
    ``environment/`` copied into the workdir when it has no Dockerfile."""
    env = task.environment
    storage_mb = storage_mb if storage_mb is not None else min(env.storage_mb, 1024)
    limits = Limits(memory_mb=env.memory_mb, storage_mb=storage_mb,
                    network=env.network, cpus=env.cpus)
    spec = SandboxSpec(limits=limits, workdir=env.workdir or DEFAULT_WORKDIR,
                       context=task.environment_dir if task.environment_dir.is_dir() else None)
    if task.dockerfile is not None:
        plan = parse_dockerfile(read_text(task.dockerfile), str(task.dockerfile), allow_run)
        spec.env.update(plan.env)
        spec.steps = plan.steps
        spec.workdir = env.workdir or plan.workdir or DEFAULT_WORKDIR
    elif spec.context is not None:
        spec.steps = [("copy", [p.name], f"{spec.workdir}/{p.name}") for p in sorted(spec.context.iterdir())]
    return spec


def oracle_agent(task: HarborTask, sandbox: Sandbox) -> AgentResult:
    """Harbor's Oracle: upload ``solution/`` to ``/solution`` and run ``solve.sh`` in the workdir."""
    if task.solution_dir is None:
        return AgentResult(error=f"task {task.name}: no solution/solve.sh for the Oracle")
    sandbox.upload(task.solution_dir, "/solution")
    result = sandbox.exec("bash /solution/solve.sh", timeout_s=task.agent.timeout_sec, env=task.solution.env)
    return AgentResult([result], result.stdout)


def nop_agent(task: HarborTask, sandbox: Sandbox) -> AgentResult:
    """Harbor's NOP agent: does nothing (a task it solves has a vacuous test)."""
    return AgentResult()


AGENTS: dict[str, Agent] = {"oracle": oracle_agent, "nop": nop_agent}

# The verifier's environment before [verifier] env: the system PATH (not the image's, which may name a folder
# the agent writes), a Python that reads no user site-packages and puts no script folder or working directory
# on sys.path (a json.py or usercustomize.py the agent left cannot run), and no loader or shell start-up file
VERIFIER_ENV = {"PATH": SYSTEM_PATH, "PYTHONNOUSERSITE": "1",
                "PYTHONSAFEPATH": "1", "PYTHONPATH": "", "PYTHONHOME": "", "PYTHONSTARTUP": "", "PYTHONUSERBASE": "",
                "PYTHONINSPECT": "", "LD_PRELOAD": "", "LD_LIBRARY_PATH": "", "LD_AUDIT": "", "BASH_ENV": "",
                "ENV": "", "PERL5LIB": "", "PERL5OPT": "", "NODE_OPTIONS": "", "NODE_PATH": "", "RUBYOPT": "",
                "RUBYLIB": "", "GCONV_PATH": "", "IFS": " \t\n"}


def run_trial(task: HarborTask, agent: Agent, agent_name: str = "", sandbox: str = "namespace",
              allow_run: bool = False) -> TrialResult:
    """Run ``agent`` on ``task`` in a fresh sandbox (the module docstring's phases); never raises for a
    failure of the task, its sandbox or the agent: those are the result's ``error``."""
    result = TrialResult(task.name, agent_name or getattr(agent, "__name__", "agent"))
    box = None
    phase = "sandbox"
    try:
        t0 = time.perf_counter()
        box = make_sandbox(sandbox, sandbox_spec(task, allow_run))
        box.start()
        result.seconds["sandbox"] = time.perf_counter() - t0
        phase = "agent"
        t0 = time.perf_counter()
        result.agent_result = out = agent(task, box)
        result.seconds["agent"] = time.perf_counter() - t0
        result.logs["agent"] = _log(out.results) + out.output[-MAX_LOG:]
        if out.error:
            return _fail(result, phase, out.error)
        if out.timed_out:
            return _fail(result, phase, f"task {task.name}: the agent ran past [agent] timeout_sec = "
                                        f"{task.agent.timeout_sec:g} s")
        phase = "verifier"
        t0 = time.perf_counter()
        verify = _verify(task, box)
        result.seconds["verifier"] = time.perf_counter() - t0
        result.logs["verifier"] = _log([verify])
        if verify.timed_out:
            return _fail(result, phase, f"task {task.name}: tests/test.sh ran past [verifier] timeout_sec = "
                                        f"{task.verifier.timeout_sec:g} s")
        phase = "reward"
        result.rewards = read_reward(task, box)
        result.reward = result.rewards.get("reward", sum(result.rewards.values()) / len(result.rewards))
        return result
    except (TrajkitError, OSError) as exc:
        message = str(exc)
        return _fail(result, phase, message if message.startswith(f"task {task.name}:") else
                     f"task {task.name}: {message}")
    finally:
        t0 = time.perf_counter()
        if box is not None:
            box.stop()
        result.seconds["stop"] = time.perf_counter() - t0


def _verify(task: HarborTask, box: Sandbox) -> ExecResult:
    box.reset_dir("/logs/verifier")
    box.reset_dir("/tests")
    box.upload(task.tests_dir, "/tests")
    return box.exec("bash /tests/test.sh", timeout_s=task.verifier.timeout_sec,
                    env={**VERIFIER_ENV, **task.verifier.env})



def _fail(result: TrialResult, phase: str, error: str) -> TrialResult:
    result.reward, result.rewards, result.error, result.failed_phase = 0.0, {}, error, phase
    return result


def _log(results: list[ExecResult]) -> str:
    return "".join(f"$ exit={r.exit_code} timed_out={r.timed_out} {r.seconds:.3f}s\n{r.stdout[-MAX_LOG:]}"
                   f"{r.stderr[-MAX_LOG:]}" for r in results)


class RewardError(TrajkitError, ValueError):
    """The verifier wrote no usable reward (the message names the task and the file)."""


def read_reward(task: HarborTask, box: Sandbox) -> dict[str, float]:
    """``/logs/verifier/reward.json`` (first) or ``reward.txt`` -> ``{name: value}``, every value finite."""
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("reward.json", "reward.txt"):
            local = Path(tmp) / name
            try:
                box.download(f"/logs/verifier/{name}", local)
            except FileNotFoundError:
                continue
            return parse_reward(local.read_text(encoding="utf-8", errors="replace"), name, task.name)
    raise RewardError(f"task {task.name}: tests/test.sh wrote no /logs/verifier/reward.json or reward.txt")


def parse_reward(text: str, name: str, task: str = "?") -> dict[str, float]:
    """The reward file's text -> ``{name: value}``.

    >>> parse_reward('{"reward": 1, "style": 0.5}', "reward.json")
    {'reward': 1.0, 'style': 0.5}
    >>> parse_reward(" 0.25\\n", "reward.txt")
    {'reward': 0.25}
    """
    where = f"task {task}: /logs/verifier/{name}"
    if not text.strip():
        raise RewardError(f"{where} is empty")
    if name.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RewardError(f"{where} is not JSON ({exc})") from None
        if not isinstance(data, dict) or not data:
            raise RewardError(f"{where} must be a non-empty object of numbers, got {text.strip()[:80]!r}")
        values = {}
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise RewardError(f"{where}: key {key!r} must be a finite number, got {value!r}")
            values[str(key)] = float(value)
        return values
    try:
        value = float(text.strip())
    except ValueError:
        raise RewardError(f"{where} must hold one number, got {text.strip()[:80]!r}") from None
    if not math.isfinite(value):
        raise RewardError(f"{where} must hold a finite number, got {text.strip()!r}")
    return {"reward": value}
