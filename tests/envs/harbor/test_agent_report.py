"""The agentic loop's report bookkeeping on hand-made records: the held-out pass rate split by the composed
generator's held-out classes, and the GRPO groups that carry no advantage (with the difficulty sampler's pools)."""
import pytest

from trajkit.demo_agent_report import dynamic_stats, group_stats, markdown, split_rates


def _task(family, rate):
    return {"family": family, "pass_rate": rate}


def test_held_out_rates_split_unseen_compositions_from_unseen_primitives():
    trained = {"match-sort-json", "write-file"}
    evaluation = {"errors": 0, "tasks": [
        _task("match-sort-json", 1.0), _task("write-file", 0.0),  # held-out instances of trained kinds
        _task("match-replace-json", 1.0), _task("column-max-json", 0.0), _task("last-sum-json", 1.0),  # compositions
        _task("lines-reverse-text", 1.0), _task("lines-min-text", 0.0),  # a primitive never trained
        _task("upper-case", 0.0)]}  # a held-out family of the hand-written families: in neither class
    got = split_rates(evaluation, trained)
    assert got["heldout_instances"]["pass_rate"] == 0.5 and got["heldout_instances"]["n"] == 2
    assert got["heldout_families"]["n"] == 6 and got["heldout_families"]["pass_rate"] == pytest.approx(3 / 6)
    assert got["unseen_compositions"]["n"] == 3 and got["unseen_compositions"]["pass_rate"] == pytest.approx(2 / 3)
    assert got["unseen_primitives"]["n"] == 2 and got["unseen_primitives"]["pass_rate"] == 0.5
    assert got["all"]["n"] == 8 and got["all"]["pass_rate"] == pytest.approx(4 / 8)


def test_hand_written_families_have_no_composed_classes():
    got = split_rates({"errors": 1, "tasks": [_task("write-file", 1.0), _task("upper-case", 0.0)]}, {"write-file"})
    assert got["unseen_compositions"] is None and got["unseen_primitives"] is None and got["errors"] == 1


def test_group_stats_first_last_mean_and_the_samplers_last_pools():
    runs = {0: {"rl": {"history": [
        {"step": 1, "reward/groups_all_same": 1.0, "sampler/informative": 3, "sampler/solved": 5},
        {"step": 2, "reward/groups_all_same": 0.5, "sampler/informative": 4, "sampler/solved": 4},
        {"step": 3, "eval/reward": 0.25},  # an eval-only row carries no group statistic
        {"step": 4, "reward/groups_all_same": 0.0, "sampler/informative": 6, "sampler/solved": 2}]}},
        1: {"rl": {"history": [{"step": 1, "reward/groups_all_same": 0.5}]}}}
    got = group_stats(runs)
    assert got["0"] == {"first": 1.0, "last": 0.0, "mean": 0.5, "sampler": {"informative": 6, "solved": 2},
                        "dynamic": None}
    assert got["1"] == {"first": 0.5, "last": 0.5, "mean": 0.5, "sampler": None, "dynamic": None}


def _dynamic_row(step, drawn, dropped, topped_up):
    return {"step": step, "reward/groups_all_same": dropped / drawn, "dynamic/prompts_drawn": float(drawn),
            "dynamic/groups_dropped": float(dropped), "dynamic/groups_topped_up": float(topped_up)}


def test_dynamic_sampling_counts_the_trained_groups_apart_from_the_generated_ones():
    # 4 groups a step. Step 1: 7 drawn, 3 dropped, 4 trained. Step 2: 4 drawn, none dropped. Step 3: the refills
    # ran out: 6 drawn, 3 dropped, one dropped group topped up -> 4 trained, 1 of them constant.
    history = [_dynamic_row(1, 7, 3, 0), _dynamic_row(2, 4, 0, 0), {"step": 2, "eval/reward": 0.5},
               _dynamic_row(3, 6, 3, 1)]
    got = dynamic_stats(history)
    assert got == {"steps": 3, "tasks_drawn": 17, "groups_dropped": 6, "groups_trained": 12, "trained_all_same": 1,
                   "trained_all_same_share": pytest.approx(1 / 12)}
    assert dynamic_stats([{"step": 1, "reward/groups_all_same": 0.25}]) is None
    g = group_stats({0: {"rl": {"history": history}}})["0"]
    assert g["mean"] == pytest.approx((3 / 7 + 0 + 3 / 6) / 3)  # the generated groups' share, dropped ones too
    assert g["dynamic"]["groups_trained"] == 12


def test_markdown_shows_the_composed_rows_only_when_a_run_has_them():
    def arm(with_composed):
        rate = {"pass_rate": 0.5, "stderr": 0.1, "n": 2}
        return {"heldout_instances": rate, "heldout_families": rate, "all": rate, "errors": 0,
                "unseen_compositions": rate if with_composed else None,
                "unseen_primitives": rate if with_composed else None}

    def report(with_composed):
        r = {a: arm(with_composed) for a in ("base", "sft", "rl")}
        return {"command": "c", "seconds": 1.0, "stage_seconds_total": {}, "per_seed": {"0": r}, "mean": r,
                "curves": {}, "traces": {}, "groups": {"0": {"first": 1.0, "last": 0.25, "mean": 0.5,
                                                              "sampler": {"informative": 6}}},
                "audit": {"seeds": {"verdict": "PASS", "checks": []}, "data": {}}}

    assert "unseen compositions" in markdown(report(True)) and "a primitive never trained" in markdown(report(True))
    assert "Dynamic sampling drew" not in markdown(report(True))
    with_dynamic = report(True)
    with_dynamic["groups"]["0"]["dynamic"] = dynamic_stats([_dynamic_row(1, 7, 3, 0), _dynamic_row(2, 6, 3, 1)])
    assert "| 0 | 13 (1.62 a trained group) | 6 | 8 | 1 (0.125) |" in markdown(with_dynamic)
    text = markdown(report(False))
    assert "unseen compositions" not in text and "a primitive never trained" not in text and "| 0 | 1.000 | 0.250 | 0.500 | informative 6 |" in text
