"""Format (a) as users load it: the REAL export of the bundled sample through ``datasets``, compared with
the source rows; the writer never drops a key silently; the source check guards every row."""
import json
import lzma

import pytest
from datasets import load_dataset

from trajkit.errors import ConfigError, InputError
from trajkit.synth import sample_paths
from trajkit.traces.export import sft
from trajkit.traces.load import iter_traces
from trajkit.traces.write import RowWriter


def kimi() -> str:
    return str(next(p for p in sample_paths() if p.name.startswith("kimi")))


def source_tools() -> dict[str, dict]:
    """Tool schemas by row id, read from the raw rows (the ``tools`` field, a JSON string there)."""
    out = {}
    with lzma.open(kimi(), "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            tools = json.loads(row["tools"]) if isinstance(row["tools"], str) else row["tools"]
            out[row["id"]] = {t["function"]["name"] if "function" in t else t["name"]: t for t in tools}
    return out


@pytest.mark.parametrize("suffix, loader", [(".parquet", "parquet"), (".jsonl", "json")])
def test_tools_come_back_as_the_source_schemas(suffix, loader, tmp_path):
    out = tmp_path / f"sft{suffix}"
    report = sft.export_openai(iter_traces([kimi()]), str(out), malformed="as_text", progress=False)
    assert report.written == 100 and report.skipped_source_check == 0
    ds = load_dataset(loader, data_files=str(out), split="train", cache_dir=str(tmp_path / "cache"))
    expected = source_tools()
    for row in ds:
        tools = json.loads(row["tools"]) if isinstance(row["tools"], str) else row["tools"]
        by_name = {t["function"]["name"]: t["function"] for t in tools}
        want = expected[row["id"]]
        assert by_name.keys() == want.keys()
        for name, fn in by_name.items():
            src = want[name].get("function", want[name])
            assert fn["parameters"] == src["parameters"], name  # no null-filled union of other schemas


def test_a_key_first_seen_in_a_later_batch_is_an_error_not_dropped(tmp_path):
    rows = [{"a": 1, "t": {"x": 1}}] * 3 + [{"a": 2, "t": {"x": 2, "y": 3}}]
    with pytest.raises(ConfigError, match=r"row 4 .* would be dropped"):
        with RowWriter(tmp_path / "x.parquet", parquet_batch=2) as w:
            for r in rows:
                w.write(r)
    assert not (tmp_path / "x.parquet").exists()


def test_the_source_check_skips_a_row_that_lost_a_tool_call(tmp_path, monkeypatch):
    real = sft.to_openai

    def lossy(trace, **kw):
        messages, tools = real(trace, **kw)
        for m in messages:
            m.pop("tool_calls", None)
        return messages, tools
    monkeypatch.setattr(sft, "to_openai", lossy)
    report = sft.export_openai(iter_traces([kimi()]), str(tmp_path / "a.jsonl"), malformed="as_text",
                               progress=False)
    assert report.skipped_source_check > 90 and "lacks tool call" in report.skipped[0]
    with pytest.raises(InputError, match="lacks tool call"):
        sft.export_openai(iter_traces([kimi()]), str(tmp_path / "b.jsonl"), malformed="as_text", progress=False,
                          strict=True)
