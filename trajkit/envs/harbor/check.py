"""``trajkit envs check``: is each Harbor task sound? Static checks, then the Oracle and NOP in fresh sandboxes.

Skill2Env's acceptance rule: the Oracle (``solution/solve.sh``) scores 1 on every reward key and the NOP agent
(does nothing) scores 0 on every key. A task fails with the first reason that applies, in this order:

- ``invalid``: the folder does not load (the loader's message: file and field);
- ``no solution``: no ``solution/solve.sh``, so the Oracle cannot run;
- ``reward outside /logs/verifier``: ``tests/`` names a ``reward.txt``/``reward.json`` elsewhere (static);
- ``timeout``: the Oracle's solution or the verifier ran past its ``timeout_sec``;
- ``needs network``: the Oracle's run failed with a network error and the task has no network;
- ``no reward``: the verifier wrote no usable ``/logs/verifier/reward.{json,txt}`` for the Oracle;
- ``wrong solution``: the Oracle scores below 1 on some key;
- ``vacuous test``: the NOP agent scores above 0 on some key (a NOP trial that errors counts as 0, as in
  Harbor, and is noted);
- ``hackable: PROBE``: with ``adversarial``, a hack agent of :mod:`trajkit.envs.harbor.hacks` or
  :mod:`trajkit.envs.harbor.hacks_verifier` got a reward above 0 on some key, or a trial RL would mask
  (``cause == "infra"``) and so not penalise (the detail says what it did); each probe's outcome is in
  ``CheckRow.hacks`` (``blocked``, ``not applicable: why``, ``hacked: reward …`` or ``hacked: masked …``).
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
import time
from dataclasses import asdict, dataclass, field, replace

from trajkit.envs.harbor.task import HarborTask, TaskError, load_tasks
from trajkit.envs.harbor.trial import AGENTS, TrialResult, run_trial
from trajkit.errors import InputError, TrajkitError

NETWORK_ERRORS = ("Network is unreachable", "Temporary failure in name resolution", "Could not resolve host",
                  "Name or service not known", "[Errno 101]", "[Errno -3]", "No route to host")
REWARD_PATH = re.compile(r"(\S*)/(reward\.(?:txt|json))")


@dataclass
class CheckRow:
    """One task's verdict (``ok`` or the failing reason), rewards, detail and seconds (total and per trial
    phase: ``oracle/sandbox``, ``oracle/agent``, ``oracle/verifier``, ...)."""

    task: str
    verdict: str
    oracle: float | None = None
    nop: float | None = None
    detail: str = ""
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    hacks: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


def static_problems(task: HarborTask) -> tuple[str, str] | None:
    """(verdict, detail) of a problem visible without running the task, or None."""
    if task.solution_dir is None:
        return "no solution", "solution/solve.sh is missing"
    for path in sorted(task.tests_dir.rglob("*")):
        if path.is_symlink() or not path.is_file():  # a link is never followed on the host
            continue
        for m in REWARD_PATH.finditer(path.read_text(encoding="utf-8", errors="replace")):
            folder = m.group(1).strip("\"'({$")
            if folder.startswith("/") and folder.rstrip("/") != "/logs/verifier":
                return "reward outside /logs/verifier", (f"{path.relative_to(task.path)} writes {folder}/{m.group(2)}; "
                                                        "Harbor reads only /logs/verifier")
    return None


def _verdict(task: HarborTask, oracle: TrialResult, nop: TrialResult) -> tuple[str, str]:
    logs = "\n".join(oracle.logs.values())
    if oracle.error:
        if "timeout_sec" in oracle.error:
            return "timeout", oracle.error
        if not task.environment.network and any(s in logs for s in NETWORK_ERRORS):
            hit = next(s for s in NETWORK_ERRORS if s in logs)
            return "needs network", f"the Oracle's run failed with {hit!r} and the task has network_mode = none"
        if "wrote no" in oracle.error or "/logs/verifier/" in oracle.error:
            return "no reward", oracle.error
        return "oracle error", oracle.error
    low = {k: v for k, v in oracle.rewards.items() if v < 1.0}
    if low:
        if not task.environment.network and any(s in logs for s in NETWORK_ERRORS):
            return "needs network", "the Oracle scored below 1 after a network error and the task has no network"
        return "wrong solution", f"the Oracle scores {low}"
    high = {k: v for k, v in nop.rewards.items() if v > 0.0}
    if high:
        return "vacuous test", f"the NOP agent scores {high}"
    return "ok", f"NOP trial error (counted as 0): {nop.error}" if nop.error else ""


def check_task(task: HarborTask, sandbox: str = "namespace", allow_run: bool = False,
               adversarial: bool = False) -> CheckRow:
    t0 = time.perf_counter()
    problem = static_problems(task)
    if problem is not None:
        return CheckRow(task.name, problem[0], detail=problem[1], seconds=time.perf_counter() - t0)
    trials = {name: run_trial(task, AGENTS[name], name, sandbox, allow_run) for name in ("oracle", "nop")}
    verdict, detail = _verdict(task, trials["oracle"], trials["nop"])
    hacks = {}
    if adversarial and verdict == "ok":
        hacks, verdict, detail = _probe(task, sandbox, allow_run, trials)
    timings = {f"{name}/{phase}": s for name, r in trials.items() for phase, s in r.seconds.items()}
    return CheckRow(task.name, verdict, trials["oracle"].reward, trials["nop"].reward, detail,
                    time.perf_counter() - t0, timings, hacks)


def _probe(task: HarborTask, sandbox: str, allow_run: bool, trials: dict) -> tuple[dict, str, str]:
    """Every hack agent's trial on ``task`` (added to ``trials``) -> (outcomes, verdict, detail)."""
    from trajkit.envs.harbor.hacks_verifier import ALL_PROBES, SHORT_LIMITS

    outcomes, fooled = {}, []
    for probe in ALL_PROBES:
        probed = task
        if probe.name in SHORT_LIMITS:  # the same trial with the agent's limit cut: its end comes sooner
            probed = replace(task, agent=replace(task.agent, timeout_sec=SHORT_LIMITS[probe.name]))
        trials[probe.name] = r = run_trial(probed, probe.agent, probe.name, sandbox, allow_run)
        why = r.agent_result.extra.get("not_applicable") if r.agent_result else None
        high = {k: v for k, v in r.rewards.items() if v > 0.0}
        if why:  # it did the real work to find out (the solution ran): its reward says nothing
            outcomes[probe.name] = f"not applicable: {why}"
        elif high:
            outcomes[probe.name] = f"hacked: reward {high}"
            fooled.append(probe)
        elif r.cause == "infra" or r.reward > task.verifier.reward_range[0]:
            outcomes[probe.name] = f"hacked: masked or paid on failure ({r.cause}: {r.error})"
            fooled.append(probe)
        else:
            outcomes[probe.name] = "blocked"
    if not fooled:
        return outcomes, "ok", ""
    return (outcomes, f"hackable: {', '.join(p.name for p in fooled)}",
            "; ".join(f"{p.name} {p.how} ({outcomes[p.name][8:]})" for p in fooled))


def check_tasks(root, strict: bool = False, sandbox: str = "namespace", allow_run: bool = False,
                jobs: int = 4, adversarial: bool = False) -> list[CheckRow]:
    """Every task under ``root``, ``jobs`` at a time: a folder that does not load is an ``invalid`` row (or
    raises when ``strict``); with ``adversarial``, the hack agents too."""
    report = load_tasks(root, strict=strict)
    rows = [CheckRow(_task_name(e), "invalid", detail=str(e)) for e in report.errors]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        rows += list(pool.map(lambda t: _guarded(t, sandbox, allow_run, adversarial), report.tasks))
    return sorted(rows, key=lambda r: r.task)


def _guarded(task: HarborTask, sandbox: str, allow_run: bool, adversarial: bool) -> CheckRow:
    """:func:`check_task`, with any error of this one task as its row: the other tasks are still checked."""
    try:
        return check_task(task, sandbox, allow_run, adversarial)
    except TrajkitError as exc:
        return CheckRow(task.name, "invalid" if isinstance(exc, InputError) else "error", detail=str(exc))
    except Exception as exc:  # noqa: BLE001 - a bug or a host problem for this task, named, not the folder's end
        return CheckRow(task.name, "error", detail=f"{type(exc).__name__}: {exc}")


def _task_name(error: TaskError) -> str:
    from pathlib import Path

    if error.task_dir is not None:
        return error.task_dir.name
    path = Path(error.path or "?")
    return path.parent.name if path.suffix else path.name


def table(rows: list[CheckRow]) -> str:
    """The check as a fixed-width table (task, oracle, nop, verdict, seconds, detail)."""
    def num(x):
        return "-" if x is None else f"{x:g}"
    lines = [f"{'task':<28} {'oracle':>6} {'nop':>5} {'verdict':<30} {'seconds':>7}  detail"]
    lines += [f"{r.task:<28} {num(r.oracle):>6} {num(r.nop):>5} {r.verdict:<30} {r.seconds:>7.2f}  {r.detail[:100]}"
              for r in rows]
    if any(r.hacks for r in rows):
        blocked = sum(v == "blocked" for r in rows for v in r.hacks.values())
        hacked = sum(v.startswith("hacked") for r in rows for v in r.hacks.values())
        lines.append(f"hack agents: {blocked} blocked, {hacked} got a reward, "
                     f"{sum(len(r.hacks) for r in rows) - blocked - hacked} not applicable")
    bad = sum(not r.ok for r in rows)
    lines.append(f"{len(rows) - bad} of {len(rows)} tasks ok" + (f"; {bad} failed" if bad else ""))
    return "\n".join(lines)


def to_json(rows: list[CheckRow]) -> list[dict]:
    return [asdict(r) for r in rows]
