"""``trajkit bench tinker`` end to end on the tiny model: both paths ran every step and, from the same seed on
the same data, trained the same adapter (the SDK path changes nothing about the numbers). Speed is never
asserted (docs/tinker.md has the measured ratio)."""
import json

import pytest

from trajkit.cli.main import build_parser


def test_bench_tinker_runs_both_paths_to_the_same_adapter(tmp_path, capsys):
    out = tmp_path / "tinker.json"
    args = build_parser().parse_args(["bench", "tinker", "--model", "tiny", "--rows", "2", "--length", "8",
                                      "--rank", "4", "--repeat", "2", "--threads", "1", "--out", str(out)])
    assert args.handler(args) == 0
    res = json.loads(out.read_text())
    assert res["steps_each"] == 3 and len(res["sdk_all_s"]) == len(res["in_process_all_s"]) == 2
    assert res["adapter_max_abs_diff"] < 1e-6
    assert res["ratio"] == pytest.approx(res["sdk_s"] / res["in_process_s"])
    assert "ratio SDK / in process" in capsys.readouterr().out
