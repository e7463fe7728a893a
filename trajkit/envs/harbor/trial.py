"""One trial of a Harbor task: a fresh sandbox, an agent, the task's tests, a reward.

The phases, each timed and logged in :class:`TrialResult` (Harbor's trial order):

1. ``sandbox``: start a sandbox from the task's ``[environment]`` and Dockerfile plan (:func:`sandbox_spec`);
2. ``agent``: the agent works under the workdir within ``[agent] timeout_sec``; ``/tests`` is not there yet
   (and ``/solution`` only for the Oracle);
3. ``verifier``: every process the agent left is gone (each ``exec`` ends with its namespace); ``/tests``,
   ``/logs/verifier`` and the verifier's own home and temporary folder are made afresh from the host, links the
   agent left that lead into them are removed, ``tests/`` is uploaded to ``/tests``, and ``bash /tests/test.sh``
   runs within ``[verifier] timeout_sec`` in an environment built from an allowlist, then ``[verifier] env``
   (:mod:`trajkit.envs.harbor.verifier`);
4. ``reward``: ``/logs/verifier/reward.json`` (a dict of finite numbers) is read first, else ``reward.txt``
   (one finite float), every value inside ``[verifier] reward_range`` (:mod:`trajkit.envs.harbor.reward`); the
   script's exit code is ignored, as Harbor ignores it. No file, an empty, malformed or huge one, a non-finite
   or out-of-range value is an error naming the task, and the reward is 0;
5. the sandbox is stopped (always).

The trial's ``reward`` is the ``reward`` key of the dict when there is one, else the mean of its values (a
text reward is ``{"reward": x}``). Agents are plain callables ``(task, sandbox) -> AgentResult``:
:func:`oracle_agent` (runs ``solution/solve.sh``), :func:`nop_agent` (does nothing).
"""
from __future__ import annotations

import errno
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from trajkit.envs.harbor.dockerfile import parse_dockerfile
from trajkit.envs.sandbox.registry import make_sandbox
from trajkit.envs.harbor.reward import RewardError, parse_reward, read_reward  # noqa: F401 (re-exported)
from trajkit.envs.harbor.task import HarborTask, read_text
from trajkit.envs.harbor.verifier import run_verifier
from trajkit.envs.sandbox.base import ExecResult, Limits, Sandbox, SandboxError, SandboxSpec
from trajkit.errors import TrajkitError

DEFAULT_WORKDIR = "/app"
MAX_LOG = 20000  # characters of each phase's output kept in a TrialResult
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # what an agent that fills the trial's tmpfs causes


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
    """A finished trial: ``reward`` (the task's minimum, 0.0 by default, on any error), the reward dict,
    ``error`` (None when the reward was read), which phase failed, per-phase ``seconds`` and ``logs``, and the
    failure's ``cause``:

    - ``"agent"``: what the agent did or left: it ran past its time limit or reported an error, its code
      raised, the verifier ran past its time limit (an answer that is a FIFO, a loop it left), the trial's disk
      is full;
    - ``"task"``: the verifier wrote no usable reward (none, empty, malformed, not a regular file, too large,
      non-finite or outside ``[verifier] reward_range``);
    - ``"infra"``: the sandbox could not be made or started (the task's build included), or the sandbox or the
      host failed (a :class:`SandboxError` or ``OSError`` of the host): the only failure that is not the
      task's minimum reward in RL (:func:`trajkit.envs.harbor.rltask.trial_reward` masks it).
    """

    task: str
    agent: str
    reward: float = 0.0
    rewards: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    failed_phase: str | None = None
    cause: str | None = None  # None when ok, else "agent" | "task" | "infra"
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

def run_trial(task: HarborTask, agent: Agent, agent_name: str = "", sandbox: str = "namespace",
              allow_run: bool = False) -> TrialResult:
    """Run ``agent`` on ``task`` in a fresh sandbox (the module docstring's phases); never raises for anything
    a task, its sandbox or the agent can cause: that is the result's ``error`` and ``cause``."""
    result = TrialResult(task.name, agent_name or getattr(agent, "__name__", "agent"))
    box = None
    try:
        t0 = time.perf_counter()
        spec = sandbox_spec(task, allow_run)
        box = make_sandbox(sandbox, spec)
        box.start()
        result.seconds["sandbox"] = time.perf_counter() - t0
        _phases(task, agent, box, spec.env, result)
    except Exception as exc:  # noqa: BLE001 - every failure is the result's, classified by _cause
        _fail(result, task, _phase_of(result), _message(task, exc), _cause(result, exc))
    finally:
        t0 = time.perf_counter()
        try:
            if box is not None:
                box.stop()
        except Exception as exc:  # noqa: BLE001 - a sandbox that cannot be removed is the host's failure
            if result.error is None:
                _fail(result, task, "stop", _message(task, exc), "infra")
        result.seconds["stop"] = time.perf_counter() - t0
    return result


def _phases(task: HarborTask, agent: Agent, box: Sandbox, image_env: dict[str, str], result: TrialResult) -> None:
    """The agent's, the verifier's and the reward's phases into ``result`` (a failure: :func:`_fail`)."""
    t0 = time.perf_counter()
    result.agent_result = out = agent(task, box)
    result.seconds["agent"] = time.perf_counter() - t0
    result.logs["agent"] = _log(out.results) + out.output[-MAX_LOG:]
    if out.error:
        return _fail(result, task, "agent", _message(task, out.error), "agent")
    if out.timed_out:
        return _fail(result, task, "agent", f"task {task.name}: the agent ran past [agent] timeout_sec = "
                                      f"{task.agent.timeout_sec:g} s", "agent")
    t0 = time.perf_counter()
    verify = run_verifier(task, box, image_env)
    result.seconds["verifier"] = time.perf_counter() - t0
    result.logs["verifier"] = _log([verify])
    if verify.timed_out:  # what the agent left can make the verifier hang (a FIFO where it reads the answer)
        return _fail(result, task, "verifier", f"task {task.name}: tests/test.sh ran past [verifier] timeout_sec = "
                                         f"{task.verifier.timeout_sec:g} s", "agent")
    try:
        result.rewards = read_reward(task, box)
    except RewardError as exc:
        return _fail(result, task, "reward", str(exc), "task")
    result.reward = result.rewards.get("reward", sum(result.rewards.values()) / len(result.rewards))


def _phase_of(result: TrialResult) -> str:
    """The phase an exception escaped from: the first whose time is not recorded yet."""
    return next((p for p in ("sandbox", "agent", "verifier") if p not in result.seconds), "reward")


def _cause(result: TrialResult, exc: Exception) -> str:
    """:class:`TrialResult`'s ``cause`` of an exception: ``infra`` when the sandbox could not start or the
    sandbox or host failed (:class:`SandboxError`, ``OSError``), except a trial disk that is full, which the
    agent can do (``agent``); anything else raised by the agent's code is ``agent``, later ``task``."""
    phase = _phase_of(result)
    if phase != "sandbox" and _disk_full(exc):
        return "agent"
    if phase == "sandbox" or isinstance(exc, (SandboxError, OSError)):
        return "infra"
    return "agent" if phase == "agent" else "task"


def _disk_full(exc: Exception) -> bool:
    """An ``OSError`` saying the trial's disk or a file size limit is full, or a ``shutil.Error`` (a copy of many
    files, its errors in its message) holding one."""
    if not isinstance(exc, OSError):
        return False
    return exc.errno in DISK_FULL or any(f"[Errno {e}]" in str(exc) for e in DISK_FULL)


def _message(task: HarborTask, error: str | Exception) -> str:
    """``error`` as one message starting with the task's name (an unexpected exception: with its type)."""
    text = error if isinstance(error, str) else str(error) if isinstance(error, (TrajkitError, OSError)) else \
        f"{type(error).__name__}: {error}"
    return text if text.startswith(f"task {task.name}:") else f"task {task.name}: {text}"


def _fail(result: TrialResult, task: HarborTask, phase: str, error: str, cause: str) -> None:
    """Record a failed trial: its reward is the task's minimum (``[verifier] reward_range``'s low end)."""
    result.reward, result.rewards, result.failed_phase, result.cause = task.verifier.reward_range[0], {}, phase, cause
    result.error = error[:MAX_LOG]


def _log(results: list[ExecResult]) -> str:
    return "".join(f"$ exit={r.exit_code} timed_out={r.timed_out} {r.seconds:.3f}s\n{r.stdout[-MAX_LOG:]}"
                   f"{r.stderr[-MAX_LOG:]}" for r in results)
