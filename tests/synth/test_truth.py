"""The parser + metrics against the synthetic generator's counts known by construction.

The generator never parses its own text: it counts while it builds. Agreement on every contract key over
hundreds of rows of both styles (every quirk included) is an independent check of the parser.
"""
import dataclasses
import json

import pytest

from trajkit.cli.main import main
from trajkit.synth import (
    SynthConfig,
    Truth,
    generate_with_truth,
    sample_paths,
    sample_with_truth,
)
from trajkit.traces.hermes import parse_row
from trajkit.traces.metrics import trace_metrics

INT_KEYS = [f.name for f in dataclasses.fields(Truth) if f.name != "tool_call_counts"]


@pytest.mark.parametrize("style", ["kimi", "glm-5.1"])
def test_every_row_matches_truth(style):
    mismatches = []
    for row, truth in generate_with_truth(SynthConfig(rows=250, style=style, seed=7)):
        tm = trace_metrics(parse_row(row))
        got = {k: tm.counts[k] for k in INT_KEYS} | {"tool_call_counts": dict(sorted(tm.tool_call_counts.items()))}
        want = dataclasses.asdict(truth)
        if got != want:
            mismatches.append((row["id"], {k: (got[k], want[k]) for k in want if got[k] != want[k]}))
    assert mismatches == []


def test_bundled_sample_stats_equal_truth(capsys):
    total = Truth()
    for _, truth in sample_with_truth():
        total += truth
    assert main(["traces", "stats", *map(str, sample_paths()), "--json", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    want = dataclasses.asdict(total)
    assert {k: data[k] for k in want} == want
    assert data["skipped_rows"] == 0
    assert {k: v["traces"] for k, v in data["by"]["source"].items()} == {"kimi": 100, "glm-5.1": 100}
    # every quirk is present in the bundled sample
    for key in ("malformed_tool_calls", "parallel_turns", "failed_tool_responses", "nonzero_exit_responses",
                "unknown_tool_calls", "invalid_argument_calls", "unanswered_tool_calls", "orphan_tool_responses",
                "recoveries", "retry_loops"):
        assert data[key] > 0, key
    assert data["truncated_responses"] > 0 and data["context_summaries"] > 0
