"""``trajkit bench traces`` (floor, floor + blocks, tutorial, trajkit side by side) and ``trajkit bench cli`` end to end on small
inputs: every side runs, the sides agree on what they count, the ratios are computed from the sides' numbers.

Speed is never asserted here (README.md, "Benchmarks", and docs/traces.md give measured numbers)."""
import json

import pytest

from trajkit.cli.main import build_parser


def test_bench_traces_four_sides(tmp_path, capsys):
    out = tmp_path / "bench_traces.json"
    args = build_parser().parse_args(["bench", "traces", "--rows", "30", "--cache-dir", str(tmp_path),
                                      "--out", str(out)])
    assert args.handler(args) == 0
    res = json.loads(out.read_text())
    floor, blocks, tutorial, ours = (res[k] for k in ("floor (orjson parse only)", "floor + blocks decoded",
                                                      "tutorial (pandas + 3 regexes)", "trajkit traces stats"))
    lines = [line for line in (tmp_path / "corpus-kimi-30.jsonl").read_bytes().splitlines() if line.strip()]
    assert floor["rows"] == blocks["rows"] == tutorial["rows"] == ours["rows"] == len(lines) == 30
    assert ours["tool_calls"] > 0 and tutorial["tool_calls"] > 0
    # the bound splits the think blocks trajkit counts; it decodes closed calls only (trajkit counts unclosed ones)
    assert blocks["think_words"] == ours["think_words"] and 0.95 * ours["tool_calls"] <= blocks["tool_calls"] <= ours["tool_calls"]
    assert all(side["cpu_s"] > 0 and side["seconds"] > 0 for side in (floor, blocks, tutorial, ours))
    assert res["speedup"] == pytest.approx(tutorial["seconds"] / ours["seconds"])
    assert res["cpu_x_floor"] == pytest.approx(ours["cpu_s"] / floor["cpu_s"])
    assert res["blocks_cpu_x_floor"] == pytest.approx(blocks["cpu_s"] / floor["cpu_s"])
    assert res["goals"] == {"cpu within 2x the floor": res["cpu_x_floor"] <= 2.0,
                            "5x faster than the tutorial": res["speedup"] >= 5.0}
    table = capsys.readouterr().out
    assert "floor (orjson parse only)" in table and "floor + blocks decoded" in table and "CPU vs the floor" in table


def test_bench_cli_rows_and_goal(tmp_path, capsys):
    out = tmp_path / "bench_cli.json"
    args = build_parser().parse_args(["bench", "cli", "--repeat", "1", "--no-torch", "--out", str(out)])
    assert args.handler(args) == 0
    res = json.loads(out.read_text())
    rows = res["rows"]
    assert list(rows) == ["python -c pass", "trajkit --version", "trajkit --help", "trajkit traces --help",
                          "trajkit train --help", "trajkit traces stats SAMPLE"]
    floor = rows["python -c pass"]["wall_s"]
    for row in rows.values():
        assert row["wall_s"] > 0 and row["x_floor"] == pytest.approx(row["wall_s"] / floor)
    assert res["goal"]["x_floor"] == rows["trajkit --version"]["x_floor"]
    assert res["goal"]["met"] == (res["goal"]["x_floor"] <= 5.0)
    assert "goal: trajkit --version within 5x" in capsys.readouterr().out
