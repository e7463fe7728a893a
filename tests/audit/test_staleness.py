"""``run.staleness``: an asynchronous run over its staleness bound, or with a ratio blow-up, fails; a run
within both passes; a synchronous run gets no check; stale steps leave ``run.mismatch`` alone."""
import math

from trajkit.audit.rewards import mismatch_check
from trajkit.audit.staleness import staleness_check


def _rows(worst, bound=1, ratio=1.0, weight=1.0, loss=0.1):
    return [{"step": i + 1, "async/staleness_max": w, "async/max_staleness": bound, "loss/ratio": ratio,
             "decoupled/weight_mean": weight, "loss/pg": loss} for i, w in enumerate(worst)]


def test_within_the_bound_passes():
    c = staleness_check("r", _rows([0, 1, 1, 1]))
    assert (c.verdict, c.statistic, c.threshold, c.items) == ("PASS", 1, 1, [])


def test_a_step_over_the_bound_fails_naming_it():
    c = staleness_check("r", _rows([0, 1, 2, 1]))
    assert c.verdict == "FAIL" and c.statistic == 2
    assert c.items == ["r: step 3: trained a sample 2 versions stale (bound 1)"]


def test_ratio_blowups_fail():
    rows = _rows([1, 1, 1])
    rows[0]["decoupled/weight_mean"] = 3.5
    rows[1]["loss/ratio"] = 0.4
    rows[2]["loss/pg"] = math.nan
    c = staleness_check("r", rows)
    assert c.verdict == "FAIL"
    assert c.items == ["r: step 1: decoupled/weight_mean 3.5 outside [0.5, 2]",
                       "r: step 2: loss/ratio 0.4 outside [0.5, 2]", "r: step 3: loss/pg is nan"]


def test_a_sync_run_has_no_check():
    assert staleness_check("r", [{"step": 1, "loss/ratio": 1.0}]) is None


def test_stale_steps_leave_the_mismatch_check():
    rows = [{"step": 1, "mismatch/mean_abs": 1e-7, "async/staleness_max": 0},
            {"step": 2, "mismatch/mean_abs": 0.2, "async/staleness_max": 1}]  # exp(0.2) = 1.22 > 1.05
    assert mismatch_check("r", rows).verdict == "PASS"
    rows[1]["async/staleness_max"] = 0  # the same gap on fresh weights is a broken sync
    assert mismatch_check("r", rows).verdict == "FAIL"
