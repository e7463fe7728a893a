"""``trajkit audit seeds``: is a claimed gain of a candidate over a baseline more than seed noise?

Each arm is a set of runs, one per seed (:mod:`trajkit.audit.runs`); each run's score is the mean of its
last ``k`` evaluations. The statistics are :mod:`trajkit.audit.seedstats` (IQM and its stratified bootstrap
CI, probability of improvement after Agarwal et al. 2021; Welch's t; leave-one-seed-out; minimum
detectable effect). Verdicts:

=========================  ==========================================================================
``seeds.count``             fewer than ``min_seeds`` (3) seeds in an arm: FAIL, and the claim is refused
                            (no other statistic is computed)
``seeds.distinct``          two runs of one arm with the same seed (the same run counted twice): FAIL
``seeds.iqm_ci``            the 95% CI of the IQM difference contains 0 (or lies below it): FAIL
``seeds.leave_one_out``     leaving one seed out of either arm takes the gain to <= 0: FAIL
``seeds.prob_improvement``  P(candidate seed > baseline seed) <= 0.5: FAIL; below 0.75: WARN
``seeds.welch``             Welch's two-sided p >= 0.05 (or t <= 0): WARN
``seeds.mde``               the observed difference is below the minimum detectable effect: WARN
``seeds.eval_se``           the difference is within 1.96 eval-sampling standard errors: WARN
``seeds.component``         (with ``--component NAME``) the share of the IQM gain of the total reward that
                            one reward function (weighted) accounts for: above 0.5 a WARN (the gain is
                            mostly that function's, e.g. a format reward's), 1 or more a FAIL (none of
                            it is left for the others)
``seeds.control``           (with ``--control``) the candidate's IQM CI over the random-reward control
                            contains 0: FAIL (spurious-reward gains: Shao et al. 2025, "Spurious
                            rewards: rethinking training signals in RLVR")
=========================  ==========================================================================

With ``paired`` (``--paired``: the candidate's run of a seed continues the baseline's run of that seed, e.g.
RL from that seed's SFT checkpoint, so the two share the seed's luck) the arms are matched by seed and the
per-seed differences d are tested instead of two independent samples:

=========================  ==========================================================================
``seeds.pairs``             a seed unknown or in one arm only: FAIL, and the claim is refused
``seeds.paired_ci``         the Student-t CI of mean(d) (paired t and its p in the detail) contains 0 or
                            lies below it: FAIL; every d the same (no spread): the sign test's p, FAIL
                            unless below 1 - ``confidence`` (6 seeds or more at 95%)
``seeds.leave_one_out``     leaving one pair out takes mean(d) to <= 0: FAIL
``seeds.prob_improvement``  the share of seeds with d > 0 (a tie counts half) <= 0.5: FAIL; below 0.75: WARN
``seeds.mde``               |mean(d)| below 2.8·s_d/sqrt(n), or s_d = 0: WARN
``seeds.eval_se``           as above
=========================  ==========================================================================

and with ``claim=no_worse`` ``seeds.noninferior`` reads the lower end of that t interval (without spread: the
sign test of every d above ``-margin``).

With ``claim=no_worse`` (is the candidate *as good as* the baseline, e.g. an asynchronous or a LoRA run against
the synchronous or full-weight one) the gain checks are replaced by a non-inferiority test:

=========================  ==========================================================================
``seeds.noninferior``       the lower end of the 95% CI of the IQM difference is at or below ``-margin``:
                            FAIL (a loss of the margin's size is not ruled out). ``margin`` 0 takes the
                            baseline arm's between-seed standard deviation (its seed spread)
``seeds.within_spread``     the candidate's IQM below the baseline's worst seed: FAIL
=========================  ==========================================================================

The 0.75 of ``prob_improvement`` is trajkit's choice (rliable reports the value, not a threshold); the
others are the conventional 5% two-sided level and 80% power. ``higher_is_better=False`` negates scores.
"""
from __future__ import annotations

import math
import statistics

from trajkit.audit import seedstats as st
from trajkit.audit.config import SeedConfig
from trajkit.audit.report import AuditReport, Check
from trajkit.audit.runs import SeedRun, load_runs
from trajkit.errors import ConfigError


def _scores(runs: list[SeedRun], cfg: SeedConfig) -> list[float]:
    sign = 1.0 if cfg.higher_is_better else -1.0
    return [sign * r.score(cfg.last_k) for r in runs]


def count_check(base: list[SeedRun], cand: list[SeedRun], cfg: SeedConfig) -> Check:
    n = min(len(base), len(cand))
    short = [f"{arm}: {len(r)} seed(s)" for arm, r in (("baseline", base), ("candidate", cand)) if len(r) < cfg.min_seeds]
    detail = (f"baseline {len(base)}, candidate {len(cand)} seeds" +
              ("; claim refused: too few seeds to tell a gain from seed noise" if short else ""))
    return Check("seeds.count", "FAIL" if short else "PASS", n, cfg.min_seeds, detail, short)


def distinct_check(base: list[SeedRun], cand: list[SeedRun]) -> Check:
    dup = []
    for arm, runs in (("baseline", base), ("candidate", cand)):
        seen: dict[int, str] = {}
        for r in runs:
            if r.seed is not None and r.seed in seen:
                dup.append(f"{arm}: {r.name} and {seen[r.seed]} both seed {r.seed}")
            elif r.seed is not None:
                seen[r.seed] = r.name
    return Check("seeds.distinct", "FAIL" if dup else "PASS", len(dup), 0,
                 f"{len(dup)} repeated seed(s) within an arm", dup)


def ci_check(c: list[float], b: list[float], cfg: SeedConfig) -> Check:
    diff = st.iqm_difference(c, b)
    lo, hi = st.bootstrap_ci(c, b, reps=cfg.reps, confidence=cfg.confidence, seed=cfg.bootstrap_seed)
    verdict = "PASS" if lo > 0 else "FAIL"
    return Check("seeds.iqm_ci", verdict, diff, 0,
                 f"IQM difference {diff:+.4g}, {cfg.confidence:.0%} stratified bootstrap CI [{lo:+.4g}, {hi:+.4g}]"
                 + ("" if lo > 0 else " contains 0 or lies below it"))


def margin_of(b: list[float], cfg: SeedConfig) -> float:
    """The non-inferiority margin: ``cfg.margin``, or (0) the baseline's between-seed sample standard deviation."""
    if cfg.margin > 0:
        return cfg.margin
    mean = sum(b) / len(b)
    return math.sqrt(sum((x - mean) ** 2 for x in b) / (len(b) - 1))


def noninferior_check(c: list[float], b: list[float], cfg: SeedConfig) -> Check:
    lo, hi = st.bootstrap_ci(c, b, reps=cfg.reps, confidence=cfg.confidence, seed=cfg.bootstrap_seed)
    return interval_noninferior(f"IQM difference {st.iqm_difference(c, b):+.4g}", "stratified bootstrap CI", lo, hi,
                                margin_of(b, cfg), cfg)


def interval_noninferior(estimate: str, interval: str, lo: float, hi: float, margin: float, cfg: SeedConfig) -> Check:
    """``seeds.noninferior`` from an interval of the difference: PASS when its lower end is above ``-margin``."""
    source = "given" if cfg.margin > 0 else "the baseline's seed standard deviation"
    ok = lo > -margin
    return Check("seeds.noninferior", "PASS" if ok else "FAIL", lo, -margin,
                 f"{estimate}, {cfg.confidence:.0%} {interval} [{lo:+.4g}, {hi:+.4g}]; "
                 f"margin {margin:.4g} ({source})" + ("" if ok else ": a loss of the margin is not ruled out"))


def spread_check(c: list[float], b: list[float]) -> Check:
    worst, centre = min(b), st.iqm(c)
    ok = centre >= worst
    return Check("seeds.within_spread", "PASS" if ok else "FAIL", centre, worst,
                 f"candidate IQM {centre:.4g} vs the baseline's seeds [{worst:.4g}, {max(b):.4g}]"
                 + ("" if ok else ": below the baseline's worst seed"))


def loo_check(c: list[float], b: list[float], base: list[SeedRun], cand: list[SeedRun]) -> Check:
    full = st.iqm_difference(c, b)
    if full <= 0:
        return Check("seeds.leave_one_out", "FAIL", full, 0, f"no gain to test: IQM difference {full:+.4g}")
    drops = st.leave_one_out(c, b)
    names = {"candidate": cand, "baseline": base}
    lost = [f"without {arm} {names[arm][i].name}: {full:+.4g} -> {d:+.4g}" for arm, i, d in drops if d <= 0]
    worst = min(d for _, _, d in drops)
    verdict = "FAIL" if lost else "PASS"
    return Check("seeds.leave_one_out", verdict, worst, 0,
                 f"smallest IQM difference with one seed left out: {worst:+.4g} (all seeds: {full:+.4g})", lost)


def probability_check(c: list[float], b: list[float], cfg: SeedConfig) -> Check:
    p = st.probability_of_improvement(c, b)
    verdict = "FAIL" if p <= 0.5 else "WARN" if p < cfg.min_probability else "PASS"
    return Check("seeds.prob_improvement", verdict, p, cfg.min_probability,
                 f"P(candidate seed > baseline seed) = {p:.3f}")


def welch_check(c: list[float], b: list[float], cfg: SeedConfig) -> Check:
    w = st.welch_t(c, b)
    verdict = "PASS" if w.p < cfg.alpha and w.t > 0 else "WARN"
    return Check("seeds.welch", verdict, w.p, cfg.alpha, f"Welch t = {w.t:.3f}, df = {w.df:.2f}, two-sided p = {w.p:.3g}")


def mde_check(c: list[float], b: list[float]) -> Check:
    mde, diff = st.minimum_detectable_effect(c, b), st.iqm_difference(c, b)
    verdict = "PASS" if abs(diff) >= mde else "WARN"
    return Check("seeds.mde", verdict, mde, abs(diff),
                 f"minimum detectable effect 2.8·σ·√(1/n+1/m) = {mde:.4g} (σ = {st.pooled_std(c, b):.4g}) "
                 f"vs observed |difference| {abs(diff):.4g}")


def eval_se_check(c: list[float], b: list[float], base: list[SeedRun], cand: list[SeedRun],
                  diff: float | None = None) -> Check | None:
    """``diff``: the difference tested (default: the IQM difference; ``paired``: the mean paired difference)."""
    items = [r.eval_items for r in base + cand]
    if any(n is None for n in items):
        return None
    se_c = st.eval_standard_error(abs(st.iqm(c)), min(r.eval_items for r in cand))
    se_b = st.eval_standard_error(abs(st.iqm(b)), min(r.eval_items for r in base))
    if math.isnan(se_c) or math.isnan(se_b):
        return None
    noise, diff = 1.96 * math.hypot(se_c, se_b), abs(st.iqm_difference(c, b) if diff is None else diff)
    return Check("seeds.eval_se", "PASS" if diff > noise else "WARN", noise, diff,
                 f"1.96 eval-sampling SE of one evaluation ({min(items)} items, sqrt(p(1-p)/N) bound) = {noise:.4g} "
                 f"vs |difference| {diff:.4g}")


def control_check(c: list[float], k: list[float], cfg: SeedConfig) -> Check:
    if len(k) < cfg.min_seeds:
        return Check("seeds.control", "FAIL", len(k), cfg.min_seeds,
                     f"random-reward control has {len(k)} seed(s); comparison refused")
    diff = st.iqm_difference(c, k)
    lo, hi = st.bootstrap_ci(c, k, reps=cfg.reps, confidence=cfg.confidence, seed=cfg.bootstrap_seed)
    return Check("seeds.control", "PASS" if lo > 0 else "FAIL", diff, 0,
                 f"candidate - random-reward control: IQM {diff:+.4g}, CI [{lo:+.4g}, {hi:+.4g}]")


def component_metric(metric: str, name: str) -> str:
    """The metrics key of reward function ``name`` beside the total ``metric``: ``eval/reward`` ->
    ``eval/reward/NAME`` (the held-out evaluation), ``reward/raw`` -> ``reward/NAME`` (training)."""
    return f"eval/reward/{name}" if metric == "eval/reward" else f"reward/{name}"


def component_check(c: list[float], b: list[float], c_part: list[float], b_part: list[float],
                    cfg: SeedConfig) -> Check:
    total = st.iqm_difference(c, b)
    part = cfg.component_weight * st.iqm_difference(c_part, b_part)
    share = part / total if total > 0 else math.inf
    verdict = "FAIL" if share >= 1 else "WARN" if share > cfg.max_component_share else "PASS"
    return Check("seeds.component", verdict, share, cfg.max_component_share,
                 f"{cfg.component} (weight {cfg.component_weight:g}) accounts for {part:+.4g} of the "
                 f"{total:+.4g} IQM gain" + ("" if total > 0 else " (no gain to share)"))


def pairs_check(base: list[SeedRun], cand: list[SeedRun]) -> Check:
    """Every run's seed known and each seed in both arms (``paired``)."""
    problems = [f"{arm} {r.name}: no seed recorded" for arm, runs in (("baseline", base), ("candidate", cand))
                for r in runs if r.seed is None]
    seeds = {arm: {r.seed for r in runs if r.seed is not None} for arm, runs in (("baseline", base),
                                                                                  ("candidate", cand))}
    for arm, other in (("baseline", "candidate"), ("candidate", "baseline")):
        problems += [f"seed {s}: in the {arm} arm only" for s in sorted(seeds[arm] - seeds[other])]
    matched = len(seeds["baseline"] & seeds["candidate"])
    detail = f"{matched} seed(s) in both arms" + (
        "; claim refused: --paired compares each seed's candidate with its own baseline" if problems else "")
    return Check("seeds.pairs", "FAIL" if problems else "PASS", len(problems), 0, detail, problems)


def no_spread(d: list[float]) -> bool:
    """Every difference the same, up to float rounding (scores are fractions of N items: 24/56 - 23/56 and
    26/56 - 25/56 differ in the last bit)."""
    return statistics.stdev(d) <= 1e-9 * max(1.0, max(abs(x) for x in d))


def sign_test(d: list[float], above: float = 0.0) -> float:
    """Two-sided p of every one of ``d`` on the same side of ``above`` (``no_spread``): 2·2⁻ⁿ, 1 when on it."""
    return 1.0 if abs(d[0] - above) <= 1e-12 else min(1.0, 2 * 0.5 ** len(d))


def _signs_only(check: str, d: list[float], above: float, cfg: SeedConfig, what: str) -> Check:
    """``check`` for differences without spread: the t interval is a point, so only their sign is tested, at the
    interval's level (1 - ``confidence``)."""
    mean, p, level = sum(d) / len(d), sign_test(d, above), 1 - cfg.confidence
    ok = mean > above + 1e-12 and p < level
    why = "" if ok else (f": {what}" if mean <= above + 1e-12 else f", not below {level:.3g}")
    return Check(check, "PASS" if ok else "FAIL", mean, above,
                 f"every seed's difference is {mean:+.4g}: no spread for a t interval; the sign test's two-sided "
                 f"p = {p:.3g} ({len(d)} of {len(d)} on one side of {above:+.4g}){why}")


def paired_ci_check(d: list[float], cfg: SeedConfig) -> Check:
    if no_spread(d):
        return _signs_only("seeds.paired_ci", d, 0.0, cfg, "no gain")
    mean, (lo, hi), t = sum(d) / len(d), st.paired_interval(d, cfg.confidence), st.paired_t(d)
    return Check("seeds.paired_ci", "PASS" if lo > 0 else "FAIL", mean, 0,
                 f"mean paired difference {mean:+.4g}, {cfg.confidence:.0%} t interval [{lo:+.4g}, {hi:+.4g}] "
                 f"(paired t = {t.t:.3f}, df = {t.df:.0f}, two-sided p = {t.p:.3g})"
                 + ("" if lo > 0 else " contains 0 or lies below it"))


def paired_noninferior_check(d: list[float], b: list[float], cfg: SeedConfig) -> Check:
    mean, margin = sum(d) / len(d), margin_of(b, cfg)
    if no_spread(d):
        return _signs_only("seeds.noninferior", d, -margin, cfg, "a loss of the margin or more")
    lo, hi = st.paired_interval(d, cfg.confidence)
    return interval_noninferior(f"mean paired difference {mean:+.4g}", "t interval", lo, hi, margin, cfg)


def paired_loo_check(d: list[float], cand: list[SeedRun]) -> Check:
    full = sum(d) / len(d)
    if full <= 0:
        return Check("seeds.leave_one_out", "FAIL", full, 0, f"no gain to test: mean paired difference {full:+.4g}")
    drops = [(cand[i], (sum(d) - d[i]) / (len(d) - 1)) for i in range(len(d))]
    lost = [f"without seed {r.seed} ({r.name}): {full:+.4g} -> {v:+.4g}" for r, v in drops if v <= 0]
    worst = min(v for _, v in drops)
    return Check("seeds.leave_one_out", "FAIL" if lost else "PASS", worst, 0,
                 f"smallest mean paired difference with one seed left out: {worst:+.4g} (all seeds: {full:+.4g})",
                 lost)


def paired_probability_check(d: list[float], cfg: SeedConfig) -> Check:
    p = (sum(x > 0 for x in d) + 0.5 * sum(x == 0 for x in d)) / len(d)
    verdict = "FAIL" if p <= 0.5 else "WARN" if p < cfg.min_probability else "PASS"
    return Check("seeds.prob_improvement", verdict, p, cfg.min_probability,
                 f"share of seeds whose candidate beats its own baseline = {p:.3f}")


def paired_mde_check(d: list[float]) -> Check:
    mde, diff = st.paired_detectable_effect(d), abs(sum(d) / len(d))
    if no_spread(d):
        return Check("seeds.mde", "WARN", mde, diff, "every seed's difference is the same: no spread to size an "
                     "effect by (a detectable effect of 0 would say nothing)")
    return Check("seeds.mde", "PASS" if diff >= mde else "WARN", mde, diff,
                 f"minimum detectable effect 2.8·s_d/√n = {mde:.4g} (s_d = {statistics.stdev(d):.4g}, n = {len(d)}) "
                 f"vs observed |mean paired difference| {diff:.4g}")


def paired_checks(base: list[SeedRun], cand: list[SeedRun], cfg: SeedConfig) -> list[Check]:
    """``seed_checks`` with ``paired``: after ``seeds.count`` and ``seeds.distinct`` passed."""
    pairs = pairs_check(base, cand)
    if pairs.verdict == "FAIL":
        return [pairs]
    cand = sorted(cand, key=lambda r: r.seed)
    by_seed = {r.seed: r for r in base}
    base = [by_seed[r.seed] for r in cand]
    c, b = _scores(cand, cfg), _scores(base, cfg)
    d = [x - y for x, y in zip(c, b)]
    if cfg.claim == "no_worse":
        return [pairs, paired_noninferior_check(d, b, cfg), spread_check(c, b)]
    checks = [pairs, paired_ci_check(d, cfg), paired_loo_check(d, cand), paired_probability_check(d, cfg),
              paired_mde_check(d)]
    se = eval_se_check(c, b, base, cand, sum(d) / len(d))
    return checks + ([se] if se else [])


def seed_checks(base: list[SeedRun], cand: list[SeedRun], cfg: SeedConfig | None = None,
                control: list[SeedRun] | None = None, parts: tuple[list[SeedRun], list[SeedRun]] | None = None
                ) -> list[Check]:
    cfg = cfg or SeedConfig()
    if cfg.claim == "no_worse" and (control or parts):
        raise ConfigError("--claim no_worse tests that the candidate is no worse than the baseline; --control and "
                          "--component test a gain's source: run them with --claim gain")
    if cfg.paired and (control or parts):
        raise ConfigError("--paired compares each seed's candidate with its own baseline; --control and --component "
                          "compare independent arms: run them without --paired")
    checks = [count_check(base, cand, cfg), distinct_check(base, cand)]
    if checks[0].verdict == "FAIL" or (cfg.paired and checks[1].verdict == "FAIL"):
        return checks
    if cfg.paired:
        return checks + paired_checks(base, cand, cfg)
    c, b = _scores(cand, cfg), _scores(base, cfg)
    if cfg.claim == "no_worse":
        return checks + [noninferior_check(c, b, cfg), spread_check(c, b)]
    checks += [ci_check(c, b, cfg), loo_check(c, b, base, cand), probability_check(c, b, cfg),
               welch_check(c, b, cfg), mde_check(c, b)]
    se = eval_se_check(c, b, base, cand)
    checks += [se] if se else []
    if parts:
        checks.append(component_check(c, b, _scores(parts[1], cfg), _scores(parts[0], cfg), cfg))
    if control:
        checks.append(control_check(c, _scores(control, cfg), cfg))
    return checks


def audit_seeds(baseline: list[str], candidate: list[str], cfg: SeedConfig | None = None,
                control: list[str] | None = None) -> AuditReport:
    """``trajkit audit seeds``: run folders / bench results of two arms -> :class:`AuditReport`."""
    cfg = cfg or SeedConfig()
    ctrl = load_runs(control, cfg.metric) if control else None
    parts = None
    if cfg.component:
        key = component_metric(cfg.metric, cfg.component)
        parts = (load_runs(baseline, key), load_runs(candidate, key))
    return AuditReport(seed_checks(load_runs(baseline, cfg.metric), load_runs(candidate, cfg.metric), cfg, ctrl,
                                   parts))


def per_seed_table(runs: list[SeedRun], cfg: SeedConfig) -> list[str]:
    """One line per run: its name, seed, number of evaluations and score (for the CLI's listing)."""
    return [f"  {r.name}  seed={r.seed}  evals={len(r.evals)}  score={r.score(cfg.last_k):.4g}" for r in runs]
