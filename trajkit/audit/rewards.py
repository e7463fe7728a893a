"""Reward hacking: rewards that pay for nothing, and a train reward that rises while held-out falls.

``rewards.null_probes``
    The task's reward functions (TRL-style callables, :mod:`trajkit.envs.rewards`) scored on completions
    that carry no answer: the empty string, an echo of the prompt's text, and format-only skeletons
    (an empty think block, ``\\boxed{}``, an empty ``<answer>`` tag, an empty tool call). Any function that
    pays any of them more than 0 is a FAIL, naming the function, the probe and the prompt — a reward an
    optimiser can collect without solving the task will be collected (Skalse et al. 2022, "Defining and
    characterizing reward hacking"; the null-model attacks on LLM judges of Zheng et al. 2024, "Cheating
    automatic LLM benchmarks: null models achieve high win rates").
``run.reward_divergence``
    Over the last ``window`` evaluations of a run: Kendall's τ of the train reward (mean of
    ``reward/raw`` over the steps up to each evaluation) against the step, and of the held-out metric
    against the step. Train rising while held-out falls (τ_train > 0 > τ_eval) is a WARN; a FAIL when
    both trends are significant (one-sided p < 0.05, scipy's exact Kendall test for small n) — the
    overoptimisation signature of Gao et al. 2023, "Scaling laws for reward model overoptimization".
``run.mismatch``
    The engine/trainer log-prob mismatch per step (``mismatch/mean_abs``, :mod:`trajkit.rl.mismatch`):
    ``exp(mean |Δ log p|)`` is a lower bound (Jensen) on NeMo RL's ``token_mult_prob_error`` (the mean of
    ``exp(|Δ log p|)``), so ``exp(mean_abs) > 1.05`` already exceeds NeMo RL's alarm level: FAIL, as is
    any step with ``mismatch/alarm``; a rising trend (Kendall τ > 0, p < 0.05 one-sided) is a WARN.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from trajkit.audit.report import Check
from trajkit.audit.runs import read_metrics

FORMAT_PROBES = {"format:think": "<think>\n\n</think>\n\n", "format:boxed": "\\boxed{}",
                 "format:answer_tag": "<answer></answer>", "format:tool_call": "<tool_call>\n{}\n</tool_call>"}
MISMATCH_LIMIT = 1.05  # NeMo RL's token_mult_prob_error alarm level


@dataclass
class ProbePrompt:
    """One prompt to probe: where it comes from, what the rewards see as ``prompts[i]`` (messages or
    text), its text for the echo probe, and its row's columns (``answer``, ...)."""

    where: str
    source: Any
    text: str
    columns: dict


def probe_prompt(where: str, prompt) -> ProbePrompt:
    """A :class:`ProbePrompt` from a task prompt (``trajkit.envs.base.Prompt``: ``text``, ``source``,
    ``columns``); the echo text is the last user message of a conversation, else the prompt text."""
    source = prompt.source if prompt.source is not None else prompt.text
    text = prompt.text
    if isinstance(source, list):
        users = [m.get("content") for m in source if isinstance(m, dict) and m.get("role") == "user"]
        text = users[-1] if users and isinstance(users[-1], str) else text
    return ProbePrompt(where, source, text, dict(prompt.columns))


def probe_completions(prompt: ProbePrompt) -> dict[str, str]:
    """The null completions of one prompt: empty, echo, and the format skeletons."""
    return {"empty": "", "echo": prompt.text, **FORMAT_PROBES}


def null_probe_check(reward_set, prompts: list[ProbePrompt], encode: Callable[[str], list[int]]) -> Check:
    """Score every null completion of every prompt with ``reward_set`` (an object with ``names`` and
    ``compute(prompts, completions, completion_ids, columns) -> (totals, {name: values}, extras)``, as
    :class:`trajkit.envs.rewards.RewardSet`)."""
    rows = [(p, kind, text) for p in prompts for kind, text in probe_completions(p).items()]
    completions = [[{"role": "assistant", "content": t}] if isinstance(p.source, list) else t for p, _, t in rows]
    totals, per, _ = reward_set.compute([p.source for p, _, _ in rows], completions,
                                        [encode(t) for _, _, t in rows], [p.columns for p, _, _ in rows])
    paid, best = [], 0.0
    for name, values in per.items():
        for (p, kind, _), v in zip(rows, values):
            if not math.isnan(v) and v > 0:
                best = max(best, v)
                paid.append(f"{name} pays {v:g} to the {kind} completion of {p.where}")
    verdict = "FAIL" if paid or any(t > 0 for t in totals if not math.isnan(t)) else "PASS"
    kinds = ", ".join(probe_completions(prompts[0])) if prompts else ""
    return Check("rewards.null_probes", verdict, best, 0,
                 f"{len(paid)} of {len(rows) * len(per)} (function, null completion) scores are positive; "
                 f"{len(prompts)} prompts x probes {kinds}", paid)


def kendall(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Kendall's τ-b of (xs, ys) and its one-sided p for τ > 0 (scipy; exact for small n without ties)."""
    from scipy.stats import kendalltau

    if len(set(ys)) < 2:
        return 0.0, 1.0
    res = kendalltau(xs, ys, alternative="greater")
    return float(res.statistic), float(res.pvalue)


def reward_divergence_check(name: str, rows: list[dict], metric: str = "eval/reward",
                            train_metric: str = "reward/raw", window: int = 5) -> Check:
    """``run.reward_divergence`` of one run's metrics rows (``metrics.jsonl``)."""
    evals = [(r["step"], r[metric]) for r in rows if isinstance(r.get(metric), (int, float)) and r["step"] > 0]
    evals = evals[-window:]
    if len(evals) < 3:
        return Check("run.reward_divergence", "WARN", None, window,
                     f"{name}: {len(evals)} evaluations after step 0 of {metric!r}; need 3 to see a trend", [name])
    train, prev = [], 0
    for step, _ in evals:
        xs = [r[train_metric] for r in rows if prev < r["step"] <= step and isinstance(r.get(train_metric), (int, float))]
        train.append(sum(xs) / len(xs) if xs else math.nan)
        prev = step
    steps = [s for s, _ in evals]
    tau_t, p_t = kendall(steps, train)
    tau_e, _ = kendall(steps, [v for _, v in evals])
    _, p_e = kendall(steps, [-v for _, v in evals])
    diverging = tau_t > 0 > tau_e
    verdict = "FAIL" if diverging and p_t < 0.05 and p_e < 0.05 else "WARN" if diverging else "PASS"
    return Check("run.reward_divergence", verdict, tau_e, 0,
                 f"{name}: over the last {len(evals)} evaluations Kendall τ train {train_metric} {tau_t:+.2f} "
                 f"(p {p_t:.3g}), held-out {metric} {tau_e:+.2f} (p falling {p_e:.3g})",
                 [f"{name}: steps {steps[0]}-{steps[-1]}"] if verdict != "PASS" else [])


def mismatch_check(name: str, rows: list[dict]) -> Check | None:
    """``run.mismatch`` of one run, or None when the run logs no ``mismatch/mean_abs``. An asynchronous step
    that trained stale samples (``async/staleness_max`` > 0) is left out: its gap includes the policy's own
    updates (``run.staleness`` checks it)."""
    series = [(r["step"], r["mismatch/mean_abs"]) for r in rows if isinstance(r.get("mismatch/mean_abs"), (int, float))
              and not r.get("async/staleness_max")]
    if not series:
        return None
    alarms = [r["step"] for r in rows if r.get("mismatch/alarm")]
    worst_step, worst = max(series, key=lambda x: x[1])
    ratio = math.exp(worst)
    tau, p = kendall([s for s, _ in series], [v for _, v in series]) if len(series) >= 3 else (0.0, 1.0)
    items = [f"{name}: step {s} exp(mean_abs) {math.exp(v):.4f}" for s, v in series if math.exp(v) > MISMATCH_LIMIT]
    items += [f"{name}: mismatch alarm at step {s}" for s in alarms]
    verdict = "FAIL" if items else "WARN" if tau > 0 and p < 0.05 else "PASS"
    if verdict == "WARN":
        items = [f"{name}: mean_abs rising (Kendall τ {tau:+.2f}, p {p:.3g})"]
    return Check("run.mismatch", verdict, ratio, MISMATCH_LIMIT,
                 f"{name}: highest exp(mean |Δ log p|) {ratio:.6f} at step {worst_step} (a lower bound of "
                 f"token_mult_prob_error); trend τ {tau:+.2f} (p {p:.3g}); {len(alarms)} alarm steps", items)


def run_checks(specs: list[str], metric: str = "eval/reward", window: int = 5) -> list[Check]:
    """``trajkit audit run``: divergence, mismatch and (dataset tasks) the rows fed, of each run folder
    or each seed of a bench result ``FILE.json:ARM``."""
    from trajkit.audit.loader import rows_check
    from trajkit.audit.runs import metric_rows
    from trajkit.audit.staleness import staleness_check

    checks = []
    for spec in specs:
        for name, rows in metric_rows(spec):
            checks.append(reward_divergence_check(name, rows, metric, window=window))
            checks += [c for c in (mismatch_check(name, rows), rows_check(name, rows), staleness_check(name, rows))
                       if c is not None]
    return checks
