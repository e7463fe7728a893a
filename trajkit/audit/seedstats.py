"""Seed statistics, as pure functions of per-seed scores (one float per run seed, higher = better).

- **IQM**, the interquartile mean: the mean of the middle 50% of scores, ``scipy.stats.trim_mean(x, 0.25)``
  (``int(0.25 n)`` scores cut from each end), the aggregate rliable recommends over the mean (robust to
  one outlier seed) and the median (less noisy). Agarwal et al. 2021, "Deep reinforcement learning at the
  edge of the statistical precipice" (NeurIPS), sec. 4.
- **Stratified bootstrap CI** of IQM(candidate) - IQM(baseline): each arm's seeds resampled with
  replacement on their own (the arms are the strata; rliable resamples runs within each task), percentile
  interval. Agarwal et al. 2021, sec. 4 and rliable's ``StratifiedBootstrap``.
- **Probability of improvement** P(X > Y) + P(X = Y)/2 for a candidate seed X and a baseline seed Y, the
  Mann-Whitney U statistic over n·m (Agarwal et al. 2021, sec. 4.3).
- **Welch's t** (unequal variances) with the Welch-Satterthwaite degrees of freedom, two-sided p.
- **Leave-one-seed-out**: the IQM difference with each seed of either arm left out in turn.
- **Minimum detectable effect** 2.8·σ·sqrt(1/n + 1/m): the difference a two-sided 5% test detects with
  80% power (z_0.975 + z_0.8 = 1.96 + 0.84 = 2.80), σ the pooled seed standard deviation; with n = m it is
  2.8·σ·sqrt(2/n) (Colas et al. 2018, "How many random seeds?", give the same power analysis).
- **Paired differences** (``--paired``: the candidate's run of a seed continues the baseline's run of that
  seed, e.g. RL from that seed's SFT checkpoint): d_i = candidate_i - baseline_i; their mean with the Student-t
  interval mean ± t_{(1+c)/2, n-1}·s_d/sqrt(n) and the paired t-test (Student 1908); the minimum detectable
  effect 2.8·s_d/sqrt(n). A t interval, not a bootstrap: with a handful of seeds the percentile bootstrap of a
  mean of differences lies above 0 whenever every difference does, even 3 of 3 (a sign test's p 0.25).
- **Eval-sampling standard error** of one evaluation of N items with mean p in [0, 1]: sqrt(p(1-p)/N), an
  upper bound for any [0, 1] reward (variance <= p(1-p)); Miller 2024, "Adding error bars to evals".
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Z_POWER = 2.8  # z_{0.975} + z_{0.80}


def trim_mean(x, proportion: float = 0.25) -> float:
    """Mean after cutting ``int(proportion * n)`` values from each end (scipy's ``trim_mean``)."""
    a = np.sort(np.asarray(x, dtype=float))
    cut = int(proportion * len(a))
    return float(a[cut:len(a) - cut].mean())


def iqm(x) -> float:
    """Interquartile mean: the 25%-trimmed mean."""
    return trim_mean(x, 0.25)


def iqm_difference(candidate, baseline) -> float:
    return iqm(candidate) - iqm(baseline)


def bootstrap_ci(candidate, baseline, *, reps: int = 2000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile interval of IQM(candidate*) - IQM(baseline*), each arm resampled with replacement on its
    own (stratified by arm). Deterministic for a given ``seed``."""
    rng = np.random.default_rng(seed)
    c, b = np.asarray(candidate, float), np.asarray(baseline, float)
    cut_c, cut_b = int(0.25 * len(c)), int(0.25 * len(b))
    rc = np.sort(c[rng.integers(0, len(c), size=(reps, len(c)))], axis=1)[:, cut_c:len(c) - cut_c].mean(axis=1)
    rb = np.sort(b[rng.integers(0, len(b), size=(reps, len(b)))], axis=1)[:, cut_b:len(b) - cut_b].mean(axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(rc - rb, [alpha, 1 - alpha])
    return float(lo), float(hi)


def probability_of_improvement(candidate, baseline) -> float:
    """P(X > Y) + 0.5 P(X = Y) over all candidate/baseline seed pairs."""
    c, b = np.asarray(candidate, float)[:, None], np.asarray(baseline, float)[None, :]
    return float(((c > b).sum() + 0.5 * (c == b).sum()) / (c.size * b.size))


@dataclass(frozen=True)
class Welch:
    t: float
    df: float
    p: float


def welch_t(candidate, baseline) -> Welch:
    """Welch's t of mean(candidate) - mean(baseline), Welch-Satterthwaite df, two-sided p (Student t)."""
    from scipy.special import stdtr

    c, b = np.asarray(candidate, float), np.asarray(baseline, float)
    vc, vb = c.var(ddof=1) / len(c), b.var(ddof=1) / len(b)
    diff = c.mean() - b.mean()
    if vc + vb == 0:
        t = math.copysign(math.inf, diff) if diff else 0.0
        return Welch(t, float(len(c) + len(b) - 2), 0.0 if diff else 1.0)
    t = diff / math.sqrt(vc + vb)
    df = (vc + vb) ** 2 / (vc ** 2 / (len(c) - 1) + vb ** 2 / (len(b) - 1))
    return Welch(float(t), float(df), float(2 * stdtr(df, -abs(t))))


def paired_t(differences) -> Welch:
    """The paired t-test of per-seed differences: t = mean/(s/sqrt(n)), df = n - 1, two-sided p."""
    from scipy.special import stdtr

    d = np.asarray(differences, float)
    mean, se = float(d.mean()), float(d.std(ddof=1)) / math.sqrt(len(d))
    df = float(len(d) - 1)
    if se == 0:
        return Welch(math.copysign(math.inf, mean) if mean else 0.0, df, 0.0 if mean else 1.0)
    t = mean / se
    return Welch(t, df, float(2 * stdtr(df, -abs(t))))


def paired_interval(differences, confidence: float = 0.95) -> tuple[float, float]:
    """The Student-t interval of the mean per-seed difference: mean ± t_{(1+confidence)/2, n-1}·s/sqrt(n)."""
    from scipy.special import stdtrit

    d = np.asarray(differences, float)
    half = float(stdtrit(len(d) - 1, (1 + confidence) / 2)) * float(d.std(ddof=1)) / math.sqrt(len(d))
    return float(d.mean()) - half, float(d.mean()) + half


def paired_detectable_effect(differences) -> float:
    """2.8 · s_d / sqrt(n): what a paired two-sided 5% test detects with 80% power."""
    d = np.asarray(differences, float)
    return Z_POWER * float(d.std(ddof=1)) / math.sqrt(len(d))


def leave_one_out(candidate, baseline) -> list[tuple[str, int, float]]:
    """``[(arm, index, IQM difference without that seed)]`` for every seed of either arm."""
    out = []
    for arm, xs in (("candidate", list(candidate)), ("baseline", list(baseline))):
        for i in range(len(xs)):
            rest = xs[:i] + xs[i + 1:]
            diff = iqm_difference(rest, baseline) if arm == "candidate" else iqm_difference(candidate, rest)
            out.append((arm, i, diff))
    return out


def pooled_std(candidate, baseline) -> float:
    c, b = np.asarray(candidate, float), np.asarray(baseline, float)
    return math.sqrt(((len(c) - 1) * c.var(ddof=1) + (len(b) - 1) * b.var(ddof=1)) / (len(c) + len(b) - 2))


def minimum_detectable_effect(candidate, baseline) -> float:
    """2.8 · pooled σ · sqrt(1/n + 1/m)."""
    return Z_POWER * pooled_std(candidate, baseline) * math.sqrt(1 / len(candidate) + 1 / len(baseline))


def eval_standard_error(p: float, n_items: int) -> float:
    """sqrt(p(1-p)/N) for a mean p in [0, 1] over N eval items (NaN outside [0, 1])."""
    if not 0.0 <= p <= 1.0 or n_items <= 0:
        return math.nan
    return math.sqrt(p * (1 - p) / n_items)
