"""Filters: each predicate removes exactly the rows it should, counted once, rows written unchanged."""
import json

import pytest

from trajkit.cli.main import main
from trajkit.errors import ConfigError
from trajkit.traces.filters import FilterConfig

from .conftest import call, quirky_row, resp


def _row(i, think_words, failed, category="A", malformed=False):
    body = "<tool_call>\n{'name': 'x', 'arguments': {}}\n</tool_call>" if malformed else call("terminal", {"command": "ls"})
    content = "error: no" if failed else {"output": "ok", "exit_code": 0, "error": None}
    return {"id": f"r{i}", "category": category, "extra_field": i, "conversations": [
        {"from": "human", "value": "go"},
        {"from": "gpt", "value": "<think>" + " w" * think_words + "</think>\n" + body},
        {"from": "tool", "value": resp("terminal", 0, content)},
        {"from": "gpt", "value": "<think>done</think>ok"}]}


@pytest.fixture
def corpus(tmp_path):
    rows = [_row(0, 100, False), _row(1, 2, False), _row(2, 100, True), _row(3, 100, False, malformed=True),
            _row(4, 100, False, category="B"), _row(0, 100, False)]  # the last is a duplicate of the first
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


def test_each_predicate_counted_once(corpus, tmp_path, capsys):
    path, rows = corpus
    out = tmp_path / "kept.jsonl"
    code = main(["traces", "filter", str(path), "--out", str(out), "--min-think-words", "10",
                 "--max-failure-rate", "0.5", "--drop-malformed", "--category", "A", "--dedup", "--json", "-q"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["read"] == 6 and report["kept"] == 1
    removed = {k: v for k, v in report["removed_by"].items() if v}
    # r4 (category B), r1 (3 think words: "w w" + "done"), r3 (malformed), r2 (1 of 1 failed), the duplicate
    assert removed == {"category": 1, "min_think_words": 1, "malformed": 1, "max_failure_rate": 1, "dedup": 1}
    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert kept == [rows[0]]  # written exactly as read, extra fields included


def test_parquet_output_roundtrips(corpus, tmp_path):
    import pyarrow.parquet as pq

    path, rows = corpus
    out = tmp_path / "kept.parquet"
    assert main(["traces", "filter", str(path), "--out", str(out), "--category", "B", "-q"]) == 0
    assert pq.read_table(out).to_pylist()[0]["id"] == "r4"


def test_bad_config_names_parameter():
    with pytest.raises(ConfigError, match="max_failure_rate must be in"):
        FilterConfig(max_failure_rate=2)


def test_quirky_row_passes_without_predicates(tmp_path, capsys):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(quirky_row()) + "\n")
    assert main(["traces", "filter", str(path), "--out", str(tmp_path / "o.jsonl"), "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["kept"] == 1
