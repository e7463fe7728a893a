"""Seed audit: statistics against scipy, exact bootstrap enumeration and hand-derived values; a two-arm
set whose whole gain is one seed is flagged, its clean twin passes; fewer than 3 seeds is refused."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import scipy.stats

from tests.audit.runs_fixture import write_arm, write_bench, write_run
from trajkit.audit import seedstats as st
from trajkit.audit.config import SeedConfig
from trajkit.audit.runs import SeedRun, load_runs
from trajkit.audit.seeds import audit_seeds, seed_checks
from trajkit.cli.main import main
from trajkit.errors import InputError

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("n", [3, 4, 5, 8, 10])
def test_iqm_is_scipys_trimmed_mean(n):
    x = RNG.normal(size=n)
    assert st.iqm(x) == pytest.approx(scipy.stats.trim_mean(x, 0.25), abs=1e-12)
    assert st.iqm([1, 2, 3, 4, 100, 6, 7, 8]) == pytest.approx(np.mean([3, 4, 6, 7]))  # 100 is cut


def test_probability_of_improvement_is_mann_whitney_u_over_nm():
    c, b = [0.3, 0.5, 0.5, 0.9], [0.5, 0.2, 0.4]
    u = scipy.stats.mannwhitneyu(c, b, alternative="two-sided").statistic
    assert st.probability_of_improvement(c, b) == pytest.approx(u / 12)
    assert st.probability_of_improvement([1, 2], [1, 2]) == 0.5


def test_welch_matches_scipy():
    c, b = RNG.normal(0.6, 0.05, 5), RNG.normal(0.5, 0.2, 4)
    ref = scipy.stats.ttest_ind(c, b, equal_var=False)
    w = st.welch_t(c, b)
    assert (w.t, w.p, w.df) == pytest.approx((ref.statistic, ref.pvalue, ref.df), rel=1e-10)


def test_bootstrap_ci_matches_exact_enumeration():
    """Arms of 3 seeds: all 27 x 27 equally likely resamples enumerated; the Monte Carlo percentile
    bounds sit where the exact distribution puts 2.5% / 97.5% of its mass (within 0.006 for 40k reps)."""
    c, b = [0.4, 0.55, 0.9], [0.45, 0.5, 0.52]
    exact = np.array([np.mean(x) - np.mean(y) for x in itertools.product(c, repeat=3)
                      for y in itertools.product(b, repeat=3)])
    lo, hi = st.bootstrap_ci(c, b, reps=40_000, seed=3)
    assert (exact < lo).mean() <= 0.025 + 0.006 and (exact <= lo).mean() >= 0.025 - 0.006
    assert (exact < hi).mean() <= 0.975 + 0.006 and (exact <= hi).mean() >= 0.975 - 0.006
    assert st.bootstrap_ci([1, 1, 1], [0, 0, 0]) == (1.0, 1.0)


def test_mde_loo_and_eval_se_by_hand():
    assert st.pooled_std([1, 2, 3], [2, 3, 4]) == pytest.approx(1.0)
    assert st.minimum_detectable_effect([1, 2, 3], [2, 3, 4]) == pytest.approx(2.8 * math.sqrt(2 / 3))
    drops = st.leave_one_out([1, 2, 6], [1, 1, 1])
    assert drops[:3] == [("candidate", 0, 3.0), ("candidate", 1, 2.5), ("candidate", 2, 0.5)]
    assert drops[3:] == [("baseline", i, 2.0) for i in range(3)]
    assert st.eval_standard_error(0.5, 100) == pytest.approx(0.05)
    assert math.isnan(st.eval_standard_error(1.5, 100))


def _arms(tmp_path, base, cand, **kw):
    return write_arm(tmp_path, "base", base, **kw), write_arm(tmp_path, "cand", cand, **kw)


def test_the_whole_gain_in_one_seed_is_flagged(tmp_path):
    base, cand = _arms(tmp_path, [0.50, 0.52, 0.48], [0.49, 0.51, 0.90])
    report = audit_seeds(base, cand)
    v = {c.id: c for c in report.checks}
    assert v["seeds.count"].verdict == "PASS"
    assert v["seeds.iqm_ci"].verdict == "FAIL" and v["seeds.iqm_ci"].statistic == pytest.approx(1.9 / 3 - 0.5)
    assert "contains 0" in v["seeds.iqm_ci"].detail
    loo = v["seeds.leave_one_out"]
    assert loo.verdict == "FAIL" and len(loo.items) == 1 and loo.items[0].startswith(f"without candidate {cand[2]}")
    assert loo.statistic == pytest.approx(0.0, abs=1e-9)  # (0.49 + 0.51) / 2 - 0.50
    assert report.exit_code == 1


def test_clean_twin_passes(tmp_path):
    base, cand = _arms(tmp_path, [0.50, 0.52, 0.48, 0.51, 0.49], [0.60, 0.62, 0.58, 0.61, 0.59])
    report = audit_seeds(base, cand)
    assert [(c.id, c.verdict) for c in report.checks] == [
        ("seeds.count", "PASS"), ("seeds.distinct", "PASS"), ("seeds.iqm_ci", "PASS"),
        ("seeds.leave_one_out", "PASS"), ("seeds.prob_improvement", "PASS"), ("seeds.welch", "PASS"),
        ("seeds.mde", "PASS"), ("seeds.eval_se", "PASS")]
    assert report.checks[2].statistic == pytest.approx(0.1)  # IQM of the middle three: 0.60 - 0.50
    assert report.exit_code == 0


def test_small_eval_set_warns_that_the_gain_is_within_eval_noise(tmp_path):
    base, cand = _arms(tmp_path, [0.50, 0.52, 0.48, 0.51, 0.49], [0.60, 0.62, 0.58, 0.61, 0.59], num_prompts=16)
    se = {c.id: c for c in audit_seeds(base, cand).checks}["seeds.eval_se"]
    expected = 1.96 * math.hypot(math.sqrt(0.6 * 0.4 / 16), math.sqrt(0.5 * 0.5 / 16))
    assert se.verdict == "WARN" and se.statistic == pytest.approx(expected)


def test_fewer_than_three_seeds_is_refused(tmp_path):
    base, cand = _arms(tmp_path, [0.5, 0.5], [0.9, 0.9])
    checks = audit_seeds(base, cand).checks
    assert [(c.id, c.verdict) for c in checks] == [("seeds.count", "FAIL"), ("seeds.distinct", "PASS")]
    assert "refused" in checks[0].detail


def test_a_seed_counted_twice_fails(tmp_path):
    base = write_arm(tmp_path, "base", [0.5, 0.5, 0.5])
    cand = write_arm(tmp_path, "cand", [0.6, 0.61, 0.62]) + [write_run(tmp_path / "again", 1, 0.61)]
    v = {c.id: c for c in audit_seeds(base, cand).checks}["seeds.distinct"]
    assert v.verdict == "FAIL" and "both seed 1" in v.items[0]


def test_control_arm_that_matches_the_candidate_fails(tmp_path):
    base, cand = _arms(tmp_path, [0.50, 0.52, 0.48], [0.60, 0.62, 0.58])
    control = write_arm(tmp_path, "ctrl", [0.61, 0.60, 0.59])
    v = {c.id: c for c in audit_seeds(base, cand, control=control).checks}["seeds.control"]
    assert v.verdict == "FAIL"
    far = write_arm(tmp_path, "far", [0.40, 0.41, 0.39])
    assert {c.id: c for c in audit_seeds(base, cand, control=far).checks}["seeds.control"].verdict == "PASS"


def test_score_is_the_mean_of_the_last_k_evaluations_after_step_0(tmp_path):
    run = load_runs([write_run(tmp_path / "r", 4, 0.8, start=0.2)], "eval/reward")[0]
    assert (run.seed, run.eval_items, run.evals[0]) == (4, 500, (0, 0.2))
    assert [s for s, _ in run.evals] == [0, 2, 4, 6, 8, 10]
    assert run.score(3) == pytest.approx(0.8)
    assert run.score(5) == pytest.approx((0.2 + 0.6 * 1 / 5 + 0.2 + 0.6 * 2 / 5 + 0.8 * 3) / 5)
    assert SeedRun("x", 0, [(0, 0.7)]).score(3) == 0.7  # only the initial evaluation


def test_bench_results_are_read_per_arm(tmp_path):
    path = write_bench(tmp_path / "train.json", {"plain": [0.5, 0.52, 0.48], "spec": [0.6, 0.62, 0.58]})
    runs = load_runs([f"{path}:spec"], "eval/reward")
    assert [(r.name, r.seed, r.score(3)) for r in runs] == [
        (f"{path}:spec:seed{i}", i, pytest.approx((0.3 + f) / 2)) for i, f in enumerate([0.6, 0.62, 0.58])]
    assert audit_seeds([f"{path}:plain"], [f"{path}:spec"]).exit_code == 0
    with pytest.raises(InputError, match="no arm 'nope'"):
        load_runs([f"{path}:nope"], "eval/reward")


def test_unusable_runs_raise_input_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no metrics.jsonl"):
        load_runs([str(tmp_path / "empty")], "eval/reward")
    folder = write_run(tmp_path / "r", 0, 0.5)
    with pytest.raises(InputError, match="no finite 'eval/acc'.*keys: eval/reward, loss, reward/mean"):
        load_runs([folder], "eval/acc")
    with pytest.raises(InputError, match="neither a run folder"):
        load_runs([str(tmp_path / "missing")], "eval/reward")


def test_cli_exit_codes_and_json(tmp_path, capsys):
    base, cand = _arms(tmp_path, [0.50, 0.52, 0.48, 0.51, 0.49], [0.60, 0.62, 0.58, 0.61, 0.59])
    assert main(["audit", "seeds", "--baseline", *base, "--candidate", *cand, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {tuple(sorted(c)) for c in out["checks"]} == {("detail", "id", "items", "statistic", "threshold", "verdict")}
    assert main(["audit", "seeds", "--baseline", *base, "--candidate", *reversed(base)]) == 1
    assert "seeds.iqm_ci" in capsys.readouterr().out
    assert main(["audit", "seeds", "--baseline", str(tmp_path / "nope"), "--candidate", *cand]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trajkit: error: ") and err.count("\n") == 1
    assert main(["audit", "seeds", "--baseline", *cand, "--candidate", *base, "--no-higher-is-better"]) == 0


def _with_component(folder, total: float, part: float):
    """Add eval/reward/fmt = ``part`` at every evaluation whose eval/reward is ``total``'s series end."""
    path = f"{folder}/metrics.jsonl"
    rows = [json.loads(line) for line in open(path)]
    for r in rows:
        if "eval/reward" in r:
            r["eval/reward/fmt"] = part if r["step"] > 0 else 0.1
            r["eval/reward/correct"] = r["eval/reward"] - r["eval/reward/fmt"]
    open(path, "w").write("".join(json.dumps(r) + "\n" for r in rows))


def test_a_gain_made_of_the_format_reward_is_flagged(tmp_path):
    """Baseline totals 0.50 with fmt 0.10; candidate totals 0.60 with fmt 0.19: fmt accounts for 0.09 of the
    0.10 gain (share 0.9, WARN); with fmt 0.25 it is 0.15 of 0.10 (share 1.5, FAIL); fmt unchanged: PASS."""
    for fmt_c, verdict, share in [(0.19, "WARN", 0.9), (0.25, "FAIL", 1.5), (0.10, "PASS", 0.0)]:
        root = tmp_path / f"c{fmt_c}"
        base, cand = _arms(root, [0.50, 0.52, 0.48, 0.51, 0.49], [0.60, 0.62, 0.58, 0.61, 0.59])
        for f in base:
            _with_component(f, 0.5, 0.10)
        for f in cand:
            _with_component(f, 0.6, fmt_c)
        c = {x.id: x for x in audit_seeds(base, cand, SeedConfig(component="fmt")).checks}["seeds.component"]
        assert c.verdict == verdict and c.statistic == pytest.approx(share, abs=1e-9)
    half = {x.id: x for x in audit_seeds(base, cand, SeedConfig(component="fmt", component_weight=0.5)).checks}
    assert half["seeds.component"].statistic == pytest.approx(0.0)
    with pytest.raises(InputError, match="no finite 'eval/reward/nope'"):
        audit_seeds(base, cand, SeedConfig(component="nope"))


def test_no_worse_margin_is_the_baseline_seed_standard_deviation():
    from trajkit.audit.seeds import margin_of

    assert margin_of([0.5, 0.6, 0.7], SeedConfig(claim="no_worse")) == pytest.approx(0.1)  # sqrt(0.02 / 2)
    assert margin_of([0.5, 0.6, 0.7], SeedConfig(claim="no_worse", margin=0.25)) == 0.25


def _no_worse(base: list[float], cand: list[float], **kw) -> dict[str, str]:
    runs = lambda xs, arm: [SeedRun(f"{arm}{i}", i, [(10, x)]) for i, x in enumerate(xs)]  # noqa: E731
    checks = seed_checks(runs(base, "b"), runs(cand, "c"), SeedConfig(claim="no_worse", last_k=1, **kw))
    return {c.id: c.verdict for c in checks}


def test_no_worse_verdicts_where_every_resample_agrees():
    """Cases whose verdict no bootstrap resample can change: every resampled IQM difference lies between
    min(cand) - max(base) and max(cand) - min(base)."""
    base = [0.5, 0.6, 0.7]
    # the same scores: resampled differences >= -0.2 > -0.25 (the given margin)
    assert _no_worse(base, base, margin=0.25) == {"seeds.count": "PASS", "seeds.distinct": "PASS",
                                                  "seeds.noninferior": "PASS", "seeds.within_spread": "PASS"}
    # better by at least 0.1 everywhere: PASS with the baseline's own spread (0.1) as the margin
    assert _no_worse(base, [0.8, 0.9, 1.0])["seeds.noninferior"] == "PASS"
    # worse by at least 0.3 everywhere: no resample reaches -0.1, and its IQM 0.15 is below the worst seed 0.5
    worse = _no_worse(base, [0.1, 0.15, 0.2])
    assert worse["seeds.noninferior"] == "FAIL" and worse["seeds.within_spread"] == "FAIL"
    assert "seeds.iqm_ci" not in worse  # the gain checks are not the question


def test_no_worse_from_the_cli_and_its_refusals(tmp_path, capsys):
    base, cand = _arms(tmp_path, [0.50, 0.52, 0.48, 0.51, 0.49], [0.505, 0.515, 0.485, 0.50, 0.495])
    assert main(["audit", "seeds", "--baseline", *base, "--candidate", *cand, "--claim", "no_worse",
                 "--margin", "0.1"]) == 0
    assert "seeds.noninferior" in capsys.readouterr().out
    assert main(["audit", "seeds", "--baseline", *base, "--candidate", *cand, "--claim", "no_worse",
                 "--control", *base]) == 2
    assert "--claim gain" in capsys.readouterr().err


def test_paired_statistics_match_scipy_and_hand_derived_values():
    """d = 1, 2, 3: mean 2, s 1, t = 2·sqrt(3) on 2 df, whose CDF is 1/2 + t/(2·sqrt(2 + t²)) (closed form), so
    p = 1 - 2·sqrt(3)/sqrt(14) and t_{0.975, 2} = 0.95/sqrt(2·0.975·0.025)."""
    t = st.paired_t([1, 2, 3])
    assert (t.t, t.df) == pytest.approx((2 * math.sqrt(3), 2.0))
    assert t.p == pytest.approx(1 - 2 * math.sqrt(3) / math.sqrt(14))
    q = 0.95 / math.sqrt(2 * 0.975 * 0.025)
    assert st.paired_interval([1, 2, 3]) == pytest.approx((2 - q / math.sqrt(3), 2 + q / math.sqrt(3)))
    assert st.paired_detectable_effect([1, 2, 3]) == pytest.approx(2.8 / math.sqrt(3))
    c, b = RNG.normal(0.6, 0.05, 6), RNG.normal(0.5, 0.2, 6)
    ref = scipy.stats.ttest_rel(c, b)
    got = st.paired_t(c - b)
    assert (got.t, got.p) == pytest.approx((ref.statistic, ref.pvalue), rel=1e-10)
    lo, hi = ref.confidence_interval(0.9)
    assert st.paired_interval(c - b, 0.9) == pytest.approx((lo, hi), rel=1e-10)
    assert st.paired_t([0.5, 0.5, 0.5]) == st.Welch(math.inf, 2.0, 0.0)


def _paired(base: dict[int, float], cand: dict[int, float], **kw) -> dict:
    runs = lambda xs, arm: [SeedRun(f"{arm}{s}", s, [(0, 0.0), (10, x)]) for s, x in xs.items()]  # noqa: E731
    checks = seed_checks(runs(base, "b"), runs(cand, "c"), SeedConfig(paired=True, last_k=1, **kw))
    return {c.id: c for c in checks}


def test_paired_seeds_are_matched_by_seed_and_shared_luck_cancels():
    """SFT seeds 0.40-0.48 (their spread larger than the gain), each seed's RL run +0.03 to +0.05 above its own:
    independent arms cannot tell (the stratified CI holds 0), the pairs can: d = 0.03, 0.04, 0.05, 0.04, mean
    0.04, s 0.008165, t = 9.80 on 3 df; the candidate's runs listed in another order than the baseline's."""
    base = {0: 0.40, 1: 0.48, 2: 0.44, 3: 0.42}
    cand = {3: 0.46, 0: 0.43, 2: 0.49, 1: 0.52}
    runs = lambda xs, arm: [SeedRun(f"{arm}{s}", s, [(10, x)]) for s, x in xs.items()]  # noqa: E731
    unpaired = {c.id: c.verdict for c in seed_checks(runs(base, "b"), runs(cand, "c"), SeedConfig(last_k=1))}
    assert unpaired["seeds.iqm_ci"] == "FAIL"
    got = _paired(base, cand)
    assert [c for c in got] == ["seeds.count", "seeds.distinct", "seeds.pairs", "seeds.paired_ci",
                                "seeds.leave_one_out", "seeds.prob_improvement", "seeds.mde"]
    assert {k: c.verdict for k, c in got.items()} == dict.fromkeys(got, "PASS")
    s = math.sqrt(2 * 0.01 ** 2 / 3)
    assert got["seeds.paired_ci"].statistic == pytest.approx(0.04)
    assert f"paired t = {0.04 / (s / 2):.3f}, df = 3" in got["seeds.paired_ci"].detail
    assert got["seeds.leave_one_out"].statistic == pytest.approx((0.03 + 0.04 + 0.04) / 3)  # seed 2 (0.05) out
    assert got["seeds.mde"].statistic == pytest.approx(2.8 * s / 2)


def test_paired_verdicts_by_hand():
    base = {0: 0.4, 1: 0.5, 2: 0.6}
    # the whole gain in one seed: d = 0, 0, 0.3 -> leaving it out gives 0; 1 of 3 seeds better plus two ties = 0.667
    one = _paired(base, {0: 0.4, 1: 0.5, 2: 0.9})
    assert one["seeds.leave_one_out"].verdict == "FAIL" and "without seed 2 (c2)" in one["seeds.leave_one_out"].items[0]
    assert one["seeds.paired_ci"].verdict == "FAIL"
    assert one["seeds.prob_improvement"].statistic == pytest.approx(2 / 3)
    assert one["seeds.prob_improvement"].verdict == "WARN"
    # every seed worse: d = -0.1 each
    worse = _paired(base, {0: 0.3, 1: 0.4, 2: 0.5})
    assert worse["seeds.paired_ci"].verdict == "FAIL" and worse["seeds.prob_improvement"].verdict == "FAIL"
    # no worse: d = -0.01, 0, +0.01 (t interval ±0.0248) against the baseline's spread 0.1 as the margin
    flat = _paired(base, {0: 0.39, 1: 0.5, 2: 0.61}, claim="no_worse")
    assert [k for k in flat][2:] == ["seeds.pairs", "seeds.noninferior", "seeds.within_spread"]
    assert flat["seeds.noninferior"].verdict == "PASS"
    q = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # t_{0.975, 2}
    assert flat["seeds.noninferior"].statistic == pytest.approx(-q * 0.01 / math.sqrt(3))


def test_paired_refuses_seeds_it_cannot_match(tmp_path, capsys):
    got = _paired({0: 0.4, 1: 0.5, 2: 0.6}, {0: 0.5, 1: 0.6, 3: 0.7})
    assert got["seeds.pairs"].verdict == "FAIL" and "seeds.paired_ci" not in got
    assert got["seeds.pairs"].items == ["seed 2: in the baseline arm only", "seed 3: in the candidate arm only"]
    unknown = seed_checks([SeedRun(f"b{i}", None, [(10, 0.5)]) for i in range(3)],
                          [SeedRun(f"c{i}", i, [(10, 0.6)]) for i in range(3)], SeedConfig(paired=True))
    assert unknown[-1].id == "seeds.pairs" and "b0: no seed recorded" in unknown[-1].items[0]
    base, cand = _arms(tmp_path, [0.50, 0.52, 0.48], [0.55, 0.58, 0.52])
    assert main(["audit", "seeds", "--baseline", *base, "--candidate", *cand, "--paired"]) == 0
    assert "seeds.paired_ci" in capsys.readouterr().out
    assert main(["audit", "seeds", "--baseline", *base, "--candidate", *cand, "--paired", "--control", *base]) == 2
    assert "without --paired" in capsys.readouterr().err


def test_paired_differences_without_spread_are_judged_by_their_signs_alone():
    """Pass rates are fractions of N items, so every seed gaining one task of 56 is easy to meet: s_d = 0 (up to
    a bit) would make the t interval a point, t infinite and the detectable effect 0. The sign test instead:
    3 of 3 above is p = 2·2⁻³ = 0.25 (FAIL), 6 of 6 is 0.03125 (PASS)."""
    three = _paired({0: 23 / 56, 1: 25 / 56, 2: 22 / 56}, {0: 24 / 56, 1: 26 / 56, 2: 23 / 56})
    assert three["seeds.paired_ci"].verdict == "FAIL" and "p = 0.25" in three["seeds.paired_ci"].detail
    assert three["seeds.mde"].verdict == "WARN"
    six = _paired({s: (20 + s) / 56 for s in range(6)}, {s: (21 + s) / 56 for s in range(6)})
    assert six["seeds.paired_ci"].verdict == "PASS" and "p = 0.0312" in six["seeds.paired_ci"].detail
    assert _paired({s: 0.5 for s in range(6)}, {s: 0.5 for s in range(6)})["seeds.paired_ci"].verdict == "FAIL"
    lost = _paired({s: (21 + s) / 56 for s in range(6)}, {s: (20 + s) / 56 for s in range(6)})["seeds.paired_ci"]
    assert lost.verdict == "FAIL" and lost.detail.endswith("on one side of +0): no gain")
    # no worse: every seed 1 task below its baseline, within the given margin of 0.05, on 6 seeds (p 0.03125)
    kept = _paired({s: (21 + s) / 56 for s in range(6)}, {s: (20 + s) / 56 for s in range(6)}, claim="no_worse",
                   margin=0.05)["seeds.noninferior"]
    assert kept.verdict == "PASS" and "p = 0.0312" in kept.detail


def test_paired_eval_noise_is_weighed_against_the_mean_paired_difference():
    runs = lambda xs, arm: [SeedRun(f"{arm}{s}", s, [(10, x)], 100) for s, x in enumerate(xs)]  # noqa: E731
    checks = seed_checks(runs([0.5, 0.6, 0.7, 0.8], "b"), runs([0.6, 0.62, 0.9, 0.81], "c"),
                         SeedConfig(paired=True, last_k=1))
    se = {c.id: c for c in checks}["seeds.eval_se"]
    assert se.threshold == pytest.approx((0.1 + 0.02 + 0.2 + 0.01) / 4)  # not the IQM difference (0.065)
