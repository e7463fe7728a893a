"""The demo's traces stage runs end to end on the bundled sample (the generate and train stages are covered
by the engine and RL tests; they need the cached tiny pair)."""
import json

import pyarrow.parquet as pq

from trajkit.cli.main import main


def test_demo_traces_stage(tmp_path, capsys):
    assert main(["demo", "--stage", "traces", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "trained/source: tool calls" in out
    calls = out.split("trained/source: tool calls ", 1)[1].split(",", 1)[0]
    trained, source = map(int, calls.split("/"))
    assert trained == source > 1000  # every source tool call of the filtered sample is trained
    results = json.loads((tmp_path / "demo.json").read_text())
    assert (tmp_path / "report" / "report.html").exists()
    assert pq.read_table(results["sft_tokens"]).num_rows > 100
