"""``trajkit bench export`` end to end on a tiny corpus: both arms, the cross-checked token count, the ratio.

Speed is never asserted (see docs/export.md, "Benchmark", for measured numbers)."""
import json

import pytest

from trajkit.cli.main import build_parser


def test_bench_export_small_corpus(tmp_path, capsys):
    out = tmp_path / "bench_export.json"
    args = build_parser().parse_args(["bench", "export", "--rows", "20", "--repeat", "1",
                                      "--cache-dir", str(tmp_path), "--out", str(out)])
    assert args.handler(args) == 0
    res = json.loads(out.read_text())
    arms = res["arms"]
    assert set(arms) == {"export", "baseline", "encode_only"}
    assert res["rows"] == 20 and arms["export"]["rows"] == 20
    assert arms["export"]["conversations"] == arms["baseline"]["conversations"] == 20
    # same rendered text: the tokenizer's batch encode counts exactly the tokens the export wrote
    assert arms["export"]["tokens"] > 0
    assert arms["baseline"]["tokens"] == arms["export"]["tokens"] == arms["encode_only"]["tokens"]
    assert res["tokens_equal"] is True
    assert res["export_seconds"] == arms["export"]["seconds"] > 0
    assert res["baseline_seconds"] == arms["baseline"]["seconds"] > 0
    assert res["ratio"] == pytest.approx(res["export_seconds"] / res["baseline_seconds"])
    assert res["goal_met"] == (res["ratio"] <= res["goal"])
    table = capsys.readouterr().out
    assert "trajkit export" in table and "render + batch encode" in table and "goal" in table
    assert not list(tmp_path.glob(".bench-export-*"))  # the export's scratch folder is removed
