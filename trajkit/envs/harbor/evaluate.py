"""``trajkit envs eval``: the pass rate of a model with the shell agent on a folder of Harbor tasks, through the
same gateway and sandbox as training (``task.name=harbor``).

Every task runs ``samples`` trials (:func:`trajkit.envs.harbor.trial.run_trial` with
:func:`trajkit.envs.harbor.agents.shell_agent`); a trial's score is its reward (``reward`` of the verifier's file); a
failed trial (sandbox error, agent or verifier timeout, no usable or an out-of-range reward) scores the task's
minimum (0 unless ``[verifier] reward_range`` says otherwise), as in Harbor and in training, and is counted
in ``errors`` (an infrastructure failure too: unlike training, a pass rate has no baseline to leave it out of).
Then, with tasks as the sampled unit (Miller 2024, "Adding error bars to evals": the samples of one task are
correlated, so the standard error is clustered by task):

- a task's pass rate is the mean of its ``K`` scores, its standard error ``sd / sqrt(K)`` (sample sd; None when
  ``K = 1``);
- a family's (``[metadata] family`` of the task, else ``category``, else the task's name) and the whole
  folder's pass rate is the mean of its tasks' pass rates, the standard error ``sd(task pass rates) /
  sqrt(n_tasks)`` (None with one task).

With ``K`` equal for every task the folder's pass rate is also the mean score of all trials.

Worked example: tasks a (family f) scores [1, 0], b (family f) [1, 1], c (family g) [0, 0]: pass rates 0.5,
1, 0; se 0.5, 0, 0; family f 0.75 (se 0.25), g 0 (se None); overall 0.5 (se 0.2887 = sd(0.5, 1, 0) / sqrt 3).

With ``K > 1`` samples at a temperature above 0 the report adds **pass@k** for k = 1, 2, 4, ... and K: the
chance that at least one of k samples of a task solves it (a score of at least ``pass_reward``, 1 by default),
by the unbiased estimator of Chen et al. (2021, "Evaluating large language models trained on code") from the
task's c solved of n samples, ``1 - C(n - c, k) / C(n, k)``, then averaged over tasks (± sd over tasks /
sqrt(n_tasks)). It is the ceiling of what sharpening a policy (RL on its own samples) can reach on those tasks
(Yue et al. 2025, "Does reinforcement learning really incentivize reasoning capacity in LLMs beyond the base
model?"): pass@1 near pass@K means the policy rarely samples a solution that it does not already give first.
Worked example: scores [1, 0, 0, 1] (c = 2 of n = 4): pass@1 0.5, pass@2 1 - C(2,2)/C(4,2) = 5/6, pass@4 1.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from trajkit.config import Checked

from trajkit.envs.harbor.task import HarborTask, scale_agent_timeouts
from trajkit.envs.harbor.trial import Agent, TrialResult, run_trial


@dataclass
class TaskScore:
    """One task's scores (one per sample), trial errors and seconds."""

    task: str
    family: str
    scores: list[float]
    errors: int = 0
    seconds: float = 0.0

    @property
    def pass_rate(self) -> float:
        return statistics.fmean(self.scores)

    def pass_at(self, k: int, pass_reward: float = 1.0) -> float:
        """The unbiased pass@k of this task's samples (module docstring), ``k <= len(scores)``."""
        return pass_at_k(len(self.scores), sum(s >= pass_reward for s in self.scores), k)


def pass_at_k(n: int, c: int, k: int) -> float:
    """``1 - C(n - c, k) / C(n, k)``: the chance that k of n samples, c of them correct, drawn without
    replacement, hold at least one correct one (Chen et al. 2021), as a product (no large binomials).

    >>> [round(pass_at_k(*nck), 4) for nck in ((4, 2, 2), (4, 2, 4), (4, 0, 4), (5, 1, 1))]
    [0.8333, 1.0, 0.0, 0.2]
    """
    if not 1 <= k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


def pass_ks(samples: int) -> list[int]:
    """The k of a report's pass@k: 1, 2, 4, ... below ``samples``, and ``samples`` (none for one sample)."""
    if samples < 2:
        return []
    return sorted({1 << i for i in range(samples.bit_length()) if 1 << i < samples} | {samples})


@dataclass
class Rate:
    """A pass rate with its standard error (None when it cannot be estimated) over ``n`` units."""

    pass_rate: float
    stderr: float | None
    n: int


@dataclass
class EvalReport:
    """The folder's rate, per family and per task; ``samples`` trials per task."""

    overall: Rate
    families: dict[str, Rate]
    tasks: list[TaskScore]
    samples: int
    extra: dict = field(default_factory=dict)
    pass_reward: float = 1.0

    def pass_at(self) -> dict[int, Rate]:
        """pass@k over tasks for every k of :func:`pass_ks` (empty for one sample a task)."""
        return {k: mean_se([t.pass_at(k, self.pass_reward) for t in self.tasks]) for k in pass_ks(self.samples)}

    def to_json(self) -> dict:
        return {"pass_rate": self.overall.pass_rate, "stderr": self.overall.stderr, "n_tasks": self.overall.n,
                "samples": self.samples, "errors": sum(t.errors for t in self.tasks),
                "pass_at_k": {str(k): vars(r) for k, r in self.pass_at().items()},
                "families": {f: vars(r) for f, r in self.families.items()},
                "tasks": [{"task": t.task, "family": t.family, "pass_rate": t.pass_rate,
                           "stderr": mean_se(t.scores).stderr, "scores": t.scores, "errors": t.errors,
                           "seconds": round(t.seconds, 3)} for t in self.tasks], **self.extra}


def mean_se(values: Sequence[float]) -> Rate:
    """Mean and standard error of the mean (sample sd / sqrt n; None for one value).

    >>> r = mean_se([0.5, 1.0, 0.0]); round(r.pass_rate, 4), round(r.stderr, 4)
    (0.5, 0.2887)
    """
    mean = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    return Rate(mean, se, len(values))


def family_of(task: HarborTask) -> str:
    return str(task.metadata.get("family") or task.metadata.get("category") or task.name)


def summarize(tasks: list[TaskScore], samples: int) -> EvalReport:
    """Per-family and overall rates from per-task scores (module docstring)."""
    by_family: dict[str, list[float]] = {}
    for t in tasks:
        by_family.setdefault(t.family, []).append(t.pass_rate)
    return EvalReport(mean_se([t.pass_rate for t in tasks]), {f: mean_se(v) for f, v in sorted(by_family.items())},
                      sorted(tasks, key=lambda t: t.task), samples)


def evaluate(tasks: Sequence[HarborTask], agent_for: Callable[[HarborTask, int], Agent], samples: int = 1,
             jobs: int = 4, sandbox: str = "namespace", on_trial: Callable[[TrialResult], None] | None = None
             ) -> EvalReport:
    """``samples`` trials of each task, ``jobs`` at a time, the agent of sample ``k`` of a task from
    ``agent_for(task, k)``; ``on_trial`` is told each finished trial (a progress bar, a log)."""
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    runs = [(t, k) for t in tasks for k in range(samples)]

    def one(run: tuple[HarborTask, int]) -> TrialResult:
        result = run_trial(run[0], agent_for(*run), "shell", sandbox)
        if on_trial is not None:
            on_trial(result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(one, runs))
    scores: dict[str, TaskScore] = {t.name: TaskScore(t.name, family_of(t), []) for t in tasks}
    for (task, _), r in zip(runs, results):
        score = scores[task.name]
        score.scores.append(r.reward)  # the task's minimum on a failure
        score.errors += r.error is not None
        score.seconds += sum(r.seconds.values())
    return summarize(list(scores.values()), samples)


def table(report: EvalReport) -> str:
    """Per task, per family and overall: pass rate ± standard error."""
    def rate(x: float, se: float | None) -> str:
        return f"{x:.3f}" + (f" ± {se:.3f}" if se is not None else "")
    lines = [f"{'task':<34} {'family':<16} {'pass rate':>15} {'errors':>6}"]
    lines += [f"{t.task:<34} {t.family:<16} {rate(t.pass_rate, mean_se(t.scores).stderr):>15} {t.errors:>6}"
              for t in report.tasks]
    lines += [""] + [f"family {f:<27} {rate(r.pass_rate, r.stderr):>15}   ({r.n} tasks)"
                     for f, r in report.families.items()]
    o = report.overall
    lines.append(f"pass rate {rate(o.pass_rate, o.stderr)} over {o.n} tasks x {report.samples} samples")
    lines += [f"pass@{k:<3} {rate(r.pass_rate, r.stderr)}   (at least one of {k} samples scores "
              f">= {report.pass_reward:g})" for k, r in report.pass_at().items()]
    return "\n".join(lines)


@dataclass
class ModelEval(Checked):
    """How :func:`evaluate_model` runs the model (the flags of ``trajkit envs eval``)."""

    samples: int = 1
    temperature: float = 0.0
    seed: int = 0
    max_turns: int = 3
    max_tokens: int = 256
    jobs: int = 4
    sandbox: Literal["namespace", "docker"] = "namespace"
    timeout_multiplier: float = 1.0
    pass_reward: float = 1.0

    __ranges__: ClassVar[dict[str, str]] = {"samples": "[1, inf)", "temperature": "[0, 2]", "seed": "[0, inf)",
                                            "max_turns": "[1, inf)", "max_tokens": "[1, inf)", "jobs": "[1, inf)",
                                            "timeout_multiplier": "(0, inf)"}
    __field_docs__: ClassVar[dict[str, str]] = {
        "samples": "trials per task (K); with K > 1 use --temperature above 0",
        "temperature": "sampling temperature of every reply (0 = greedy)",
        "seed": "seeds every trial's requests (with its session id and call index)",
        "max_turns": "the shell agent's replies per trial",
        "max_tokens": "tokens per reply",
        "jobs": "trials at once (the gateway batches their requests)",
        "sandbox": "where trials run",
        "timeout_multiplier": "scales every task's [agent] timeout_sec (Harbor's --timeout-multiplier): a slow or "
                              "shared CPU must not turn a model's answers into agent timeouts",
        "pass_reward": "a sample solves its task when it scores at least this (pass@k, reported with --samples > 1)",
    }


def evaluate_model(tasks: Sequence[HarborTask], model: str, how: ModelEval, save_dir: str | None = None,
                   on_trial: Callable[[TrialResult], None] | None = None) -> EvalReport:
    """The model folder ``model`` behind trajkit's gateway on a loopback port, the shell agent of every trial
    talking to it through the sandbox's relay; with ``save_dir`` every trial's conversation is saved there as
    the gateway's stitched samples and Hermes rows (``trajkit traces stats SAVE_DIR/hermes.jsonl``)."""
    from trajkit.envs.harbor.agents import shell_agent
    from trajkit.gateway import GatewayConfig, running
    from trajkit.gateway.export import save_sessions
    from trajkit.gateway.server import load_gateway

    config = GatewayConfig(model_name="policy", force_temperature=how.temperature, force_seed=how.seed,
                           default_max_tokens=how.max_tokens)
    tasks = scale_agent_timeouts(tasks, how.timeout_multiplier)
    gateway = load_gateway(model, config)
    try:
        with running(gateway) as url:
            report = evaluate(tasks, lambda t, k: shell_agent(url, f"eval-{t.name}-{k}", "policy", how.max_turns),
                              how.samples, how.jobs, how.sandbox, on_trial)
        if save_dir is not None:
            save_sessions(gateway.sessions.all(), save_dir)
    finally:
        gateway.close()
    report.pass_reward = how.pass_reward
    report.extra = {"model": model, "temperature": how.temperature, "seed": how.seed, "max_turns": how.max_turns,
                    "max_tokens": how.max_tokens, "timeout_multiplier": how.timeout_multiplier}
    return report
