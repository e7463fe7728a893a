"""``trajkit bench train`` with arms of one's own (``--arm``), on the toy config: each arm really runs its
overrides (LoGRA's sketched weights have no ``.grad``, so its logged grad norm differs from AdamW's on the
same batch), both share the seed's prompts (the first step's rewards agree), and the summary has every
arm's reward curve. Malformed ``--arm`` values fail before any model loads."""
import json

import pytest

from trajkit.bench.train import parse_arms
from trajkit.cli.main import build_parser


def test_custom_arms_run_side_by_side(tmp_path):
    out = tmp_path / "train.json"
    args = build_parser().parse_args(["bench", "train", "--steps", "2", "--seeds", "1", "--out", str(out),
                                      "--plot", str(tmp_path / "train.png"), "--arm", "adamw=optim.name=adamw",
                                      "--arm", "logra=optim.name=logra optim.logra.rank=8", "eval.every=1"])
    assert args.handler(args) == 0
    res = json.loads(out.read_text())
    assert list(res["summary"]["arms"]) == ["adamw", "logra"]
    adamw, logra = res["runs"][0]["adamw"]["steps"], res["runs"][0]["logra"]["steps"]
    assert adamw[0]["reward/raw"] == logra[0]["reward/raw"]  # same seed, same weights: same first rollouts
    assert adamw[0]["loss/grad_norm"] != logra[0]["loss/grad_norm"]
    for arm in ("adamw", "logra"):
        curve = res["summary"]["reward"][arm]["curve"]
        assert [c[0] for c in curve] == [0, 1, 2] and all(len(c) == 3 for c in curve)
    assert (tmp_path / "train.png").stat().st_size > 0


@pytest.mark.parametrize("spec, message", [("no-equals", "expected NAME="), ("a b=x=1", "plain word"),
                                           ("a=optim.lr", "not a key=value")])
def test_malformed_arms_are_refused(spec, message):
    with pytest.raises(SystemExit, match=message):
        parse_arms([spec])
    assert list(parse_arms([], no_fixed=True)) == ["plain", "spec"]
    with pytest.raises(SystemExit, match="given twice"):
        parse_arms(["a=x=1", "a=y=2"])


def _step(gen: float, other: float, accept: float) -> dict:
    from trajkit.rl.stages import GENERATION, STAGES

    row = {f"time/{k}": (gen if k == GENERATION else other) for k in STAGES}
    return {**row, "gen/acceptance_length": accept, "reward/raw": 0.5, "length/model_tokens": 10}


def test_summary_ratios_against_plain_and_acceptance_per_step_are_hand_derived():
    """Two seeds, three steps (the first, warm-up, is left out of the seconds): plain's generation 6 s vs
    an arm's 3 s is 2x; the step (6 + 4 x 1 s vs 3 + 4 x 1.5 s) is 10 / 9; acceptance per step is the mean
    over seeds, warm-up included."""
    from trajkit.bench.train import summarize, table
    from trajkit.rl.stages import STAGES

    def record(accepts):
        return {"plain": {"steps": [_step(99, 99, 1.0)] + [_step(6, 1, 1.0)] * 2, "eval": []},
                "frozen": {"steps": [_step(99, 99, accepts[0])] + [_step(3, 1.5, a) for a in accepts[1:]],
                           "eval": []}}

    summary = summarize([record([2.0, 1.8, 1.6]), record([2.2, 1.6, 1.2])])
    others = len(STAGES) - 1
    assert summary["vs_plain"]["frozen"]["generation"] == pytest.approx(2.0)
    assert summary["vs_plain"]["frozen"]["step"] == pytest.approx((6 + others) / (3 + 1.5 * others))
    assert summary["acceptance_length"]["frozen"] == pytest.approx([2.1, 1.7, 1.4])
    text = table(summary)
    assert "accept/step frozen     2.10 1.70 1.40" in text and "accept/step plain" not in text
    assert "vs plain frozen       step" in text


def test_sync_and_async_arms_with_long_tailed_episodes(tmp_path):
    """The sync-vs-async comparison on the tiny model with lognormal episode waits: both arms run their steps,
    the async arm within its bound, and the summary has steps and reward per hour and their ratio (no
    timing is asserted: speed is what the benchmark reports, not what a test can pin)."""
    from .conftest import TINY

    out = tmp_path / "train.json"
    args = build_parser().parse_args(["bench", "train", "--steps", "3", "--seeds", "1", "--out", str(out),
                                      "--plot", str(tmp_path / "train.png"), "--arm", "sync=", "--arm", "async=rollout.mode=async rollout.max_staleness=1",
                                      *TINY, "task.latency_median_s=0.02", "task.latency_sigma=1.0",
                                      "draft.kind=none", "draft.distill=false", "eval.every=0"])
    assert args.handler(args) == 0
    res = json.loads(out.read_text())
    sync, asyn = res["runs"][0]["sync"]["steps"], res["runs"][0]["async"]["steps"]
    assert len(sync) == len(asyn) == 3 and "async/staleness_max" not in sync[0]
    # K=1 bounds every step; which later steps reach 1 depends on whether a batch's engine call came before
    # or after the previous update's push (wall-clock order: the exact schedule is test_async's scripted one)
    staleness = [s["async/staleness_max"] for s in asyn]
    assert staleness[0] == 0 and all(x in (0, 1) for x in staleness), staleness
    assert sync[0]["reward/raw"] == asyn[0]["reward/raw"]  # the first batch: same weights, prompts, seed
    arms = res["summary"]["arms"]
    for arm in ("sync", "async"):
        assert arms[arm]["steps_per_hour"] == 3600 / arms[arm]["wall_step_seconds"]
    assert res["summary"]["vs_first"]["async"]["steps_per_hour"] == \
        arms["async"]["steps_per_hour"] / arms["sync"]["steps_per_hour"]


def test_per_hour_is_hand_derived():
    from trajkit.bench.train import _per_hour

    got = _per_hour([{"wall/step_s": 2.0, "reward/raw": 0.5}, {"wall/step_s": 4.0, "reward/raw": 0.25}])
    assert got == {"wall_step_seconds": 3.0, "steps_per_hour": 1200.0, "reward_per_hour": 0.375 * 1200.0}


def test_wall_curve_is_hand_derived():
    """Reward against wall-clock: cumulative step seconds and reward/raw, each the mean over seeds (seed 0
    steps of 2 s and 4 s, seed 1 of 4 s and 2 s: 3 s and 6 s)."""
    from trajkit.bench.train import _wall_curve

    seeds = [{"a": {"steps": [{"wall/step_s": 2.0, "reward/raw": 0.5}, {"wall/step_s": 4.0, "reward/raw": 0.25}]}},
             {"a": {"steps": [{"wall/step_s": 4.0, "reward/raw": 0.0}, {"wall/step_s": 2.0, "reward/raw": 0.75}]}}]
    assert _wall_curve(seeds, "a") == [[3.0, 0.25], [6.0, 0.5]]
    assert _wall_curve([{"a": {"steps": [{"reward/raw": 0.5}]}}], "a") == []  # no wall clock measured


def test_episodes_per_second_is_hand_derived():
    """Two measured steps of 8 episodes, 2 s and 4 s: 3 s a step, 1/3 step/s, 8/3 episodes/s; a quarter of
    the first step's rows unscorable (failed trials), none of the second's: 1/8."""
    from trajkit.bench.train import _per_hour

    got = _per_hour([{"wall/step_s": 2.0, "wall/episodes": 8, "reward/raw": 0.5, "reward/unscorable": 0.25},
                     {"wall/step_s": 4.0, "wall/episodes": 8, "reward/raw": 0.25, "reward/unscorable": 0.0}])
    assert got == pytest.approx({"wall_step_seconds": 3.0, "steps_per_hour": 1200.0, "reward_per_hour": 450.0,
                                 "steps_per_s": 1 / 3, "episodes_per_s": 8 / 3, "unscorable": 0.125})


class _Cfg:
    class eval:  # noqa: N801  (the shape of TrainConfig.eval)
        every = 0

    class rollout:  # noqa: N801
        mode = "sync"


class _FakeTrainer:
    """A trainer whose steps only say that they ran (``calls``), so the arms' order can be read back."""

    cfg = _Cfg

    def __init__(self, calls):
        self.calls = calls

    def close(self):
        pass


@pytest.mark.parametrize("order, expected", [
    ("alternate", [["trajkit", "trajkit", "trl"], ["trl", "trajkit", "trajkit"], ["trajkit", "trajkit", "trl"]]),
    ("after", [["trajkit", "trajkit", "trl"]] * 3)])
def test_the_peer_runs_before_trajkit_on_odd_seeds_when_alternating(monkeypatch, order, expected):
    """``--peer-order alternate`` (the default): TRL after trajkit's two steps on seeds 0 and 2, before them on
    seed 1; ``after``: always after. Each seed's record keeps one key order (trajkit's arms, then the peer),
    and the summary says which seeds ran the peer first."""
    import trajkit.bench.train as bench

    calls = []
    monkeypatch.setattr(bench, "_trainers", lambda args, seed, steps: {"trajkit": _FakeTrainer(calls)})
    monkeypatch.setattr(bench, "_record_step", lambda record, t, step: (
        calls.append("trajkit"), record["steps"].append({"step": step})))
    monkeypatch.setattr(bench, "_trl_arm", lambda args, first: (calls.append("trl"), {"steps": [], "eval": []})[1])
    args = build_parser().parse_args(["bench", "train", "--peer", "trl", "--arm", "trajkit="]
                                     + (["--peer-order", order] if order != "alternate" else []))
    got = []
    for seed in range(3):
        calls.clear()
        record = bench.run_seed(args, seed, 2)
        assert list(record) == ["trajkit", "trl"] and len(record["trajkit"]["steps"]) == 2
        got.append(list(calls))
    assert got == expected
    assert [bench.peer_first(args, s) for s in range(3)] == [e[0] == "trl" for e in expected]


def test_step_seconds_per_seed_and_their_ratio_are_hand_derived():
    """Seed 0: trajkit's measured steps (the first excluded) 2 s + 1 s stages -> 3 s, TRL 6 s; seed 1: 4 s
    against 8 s: trajkit/trl 0.50 on both seeds, in the table's per-seed line."""
    from trajkit.bench.train import STAGES, summarize, table

    def steps(*totals):
        rows = []
        for total in totals:
            row = {f"time/{k}": 0.0 for k in STAGES}
            row["time/generation"], row["time/policy_update"] = total / 3, 2 * total / 3
            row.update({"gen/acceptance_length": 1.0, "wall/step_s": total, "reward/raw": 0.5})
            rows.append(row)
        return {"steps": rows, "eval": []}

    seeds = [{"trajkit": steps(99.0, 3.0), "trl": steps(99.0, 6.0)},
             {"trajkit": steps(99.0, 4.0), "trl": steps(99.0, 8.0)}]
    summary = summarize(seeds)
    assert summary["arms"]["trajkit"]["seed_step_seconds"] == pytest.approx([3.0, 4.0])
    assert summary["arms"]["trl"]["seed_step_seconds"] == pytest.approx([6.0, 8.0])
    assert "step by seed trl        6.000 8.000   trajkit/trl 0.50 0.50" in table(summary)
