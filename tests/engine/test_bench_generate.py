"""``trajkit bench generate`` pieces that do not need the tiny pair: auto-k stays within the measured k,
flags are checked, and the run reports progress."""
import argparse

import pytest
import torch

from tests.engine.helpers import perturbed_copy, target_model
from trajkit.bench import generate
from trajkit.bench.generate_methods import build_methods
from trajkit.cli.main import main
from trajkit.models.spec import TinySpec

SPEC = TinySpec(vocab_size=16, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=64)


@pytest.mark.parametrize("ks", [[2, 3], [1], [2, 4]])
def test_auto_k_picks_only_measured_k(ks):
    target = target_model(SPEC, seed=1, dtype=torch.float64)
    methods = build_methods(target, perturbed_copy(target, 0.3, seed=2), ks, 1.0)
    auto = next(m for m in methods if m.family == "ours-auto")
    assert auto.engine.config.max_draft_tokens == max(ks)
    run = auto.run([[1, 2, 3]], 0, 8)
    assert run.stats["num_draft_tokens"] <= max(ks)  # a k the costs table has: _engine_stats looks it up


def test_summary_of_an_auto_row_finds_its_costs():
    costs = {"t1_ms": 1.0, "c_draft": 0.1, "c_ngram": 0.01, "v": {"1": 1.1, "2": 1.2, "3": 1.3}}
    method = argparse.Namespace(k=-1, family="ours-auto")
    stats = [{"new_tokens": 10, "target_calls": 5, "step_tokens": 10, "row_steps": 5, "accepted": 4,
              "proposed": 6, "position_tried": [3, 3], "overlap_sum": 4.2, "num_draft_tokens": 3}]
    row = generate._engine_stats(stats, method, costs)
    assert row["k_used"] == 3 and row["v_k"] == 1.3


@pytest.mark.parametrize("flag,value", [("--ks", "2,x"), ("--ks", "0"), ("--batch-sizes", "")])
def test_bad_lists_are_one_line(capsys, flag, value):
    assert main(["bench", "generate", flag, value]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trajkit: error: {flag} takes comma-separated integers") and err.count("\n") == 1


def test_measure_reports_progress(capsys):
    calls = []
    method = argparse.Namespace(name="m", run=lambda p, s, n: calls.append(s) or "r")
    runs = generate._measure([method], [[[1]], [[1]], [[1]]], 4, batch=1)
    assert calls == [10_000, 0, 1] and [r for _, r in runs["m"]] == ["r", "r"]
    err = capsys.readouterr().err.splitlines()
    assert err == ["bench generate: batch 1: 1 methods x (2 seeds + 1 warm-up) = 3 runs",
                   "bench generate: batch 1: seed 1/2 done", "bench generate: batch 1: seed 2/2 done"]


def test_eagle_arm_runs_exactly_with_auto_k_and_its_own_costs():
    """The eagle arm (``--drafters eagle``): greedy rows equal ours plain's; auto k stays within the
    measured k; the costs table has the head's c and the v(k) measured with features captured."""
    from trajkit.engine.drafters.eagle import EagleHead

    target = target_model(SPEC, seed=1, dtype=torch.float64)
    head = EagleHead(target, (1, 2), init_seed=0).double()
    methods = build_methods(target, None, [2, 3], 0.0, eagle=head, drafters=("eagle",))
    assert [m.family for m in methods] == ["ours-plain", "hf-plain", "ours-eagle", "ours-eagle", "ours-eagle-auto"]
    runs = {m.name: m.run([[1, 2, 3], [4, 5]], 0, 8) for m in methods if m.family.startswith("ours")}
    assert runs["ours eagle k=3"].stats["proposed"] > 0
    assert runs["ours eagle k=auto"].stats["num_draft_tokens"] <= 3
    pair = argparse.Namespace(target=target, draft=None, eagle=head)
    costs = generate._costs(pair, [[1, 2, 3], [4, 5]], 3)
    assert "c_draft" not in costs and costs["c_eagle"] > 0 and set(costs["v_eagle"]) == {"1", "2", "3"}


@pytest.mark.parametrize("value,pair,message", [("eagle", "tiny", "the tiny pair has no EAGLE head"),
                                                ("medusa", "smollm2", "--drafters takes names from")])
def test_bad_drafters(value, pair, message):
    from trajkit.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        generate._drafters(value, pair)
    assert generate._drafters(None, "smollm2") == ("draft", "ngram", "eagle")


@pytest.mark.parametrize("flags,message", [(["--vllm"], "--vllm needs --pair smollm2"),
                                           (["--vllm", "--pair", "smollm2", "--vllm-k", "0"], "--vllm-k must be >= 1"),
                                           (["--vllm", "--pair", "smollm2", "--batch-sizes", "8"], "runs at batch 1")])
def test_bad_vllm_arms_fail_before_any_model_loads(flags, message):
    from trajkit.cli.main import build_parser
    from trajkit.errors import ConfigError

    args = build_parser().parse_args(["bench", "generate", *flags])
    with pytest.raises(ConfigError, match=message):
        generate._check_vllm(args, generate._ints(args.batch_sizes, "--batch-sizes"))
