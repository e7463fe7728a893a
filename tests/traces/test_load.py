"""Loaders (JSONL, gz, JSON, Parquet, Hugging Face datasets from a local folder) and bad-input handling."""
import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trajkit.cli.main import main
from trajkit.errors import InputError
from trajkit.traces.load import iter_lines, iter_traces, source_label
from trajkit.traces.stats import compute_stats

from .conftest import TOOLS, quirky_row


def _good(i):
    row = quirky_row()
    row["id"] = f"row-{i}"
    return row


def _write_jsonl(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


@pytest.fixture
def messy_jsonl(tmp_path):
    lines = [json.dumps(_good(1)), json.dumps(_good(2)),
             '{"id": "broken", "conversations": [',                          # line 3: invalid JSON
             json.dumps(_good(4)),
             json.dumps({"id": "no-conv"}),                                    # line 5: no conversations
             "",                                                               # blank lines are ignored
             json.dumps({"conversations": [{"from": "robot", "value": "x"}]}),  # line 7: unknown role
             json.dumps(_good(8))]
    return _write_jsonl(tmp_path / "messy.jsonl", lines)


def test_lenient_keeps_valid_rows_and_names_file_row_field(messy_jsonl):
    errors = []
    ids = [t.id for t in iter_traces([messy_jsonl], on_error=errors.append)]
    assert ids == ["row-1", "row-2", "row-4", "row-8"]
    assert [(e.path, e.row, e.field) for e in errors] == [
        (messy_jsonl, 3, None), (messy_jsonl, 5, "conversations"), (messy_jsonl, 7, "conversations[0].from")]
    assert str(errors[0]).startswith(f"{messy_jsonl}:3: invalid JSON")


def test_strict_raises_first_bad_row(messy_jsonl):
    with pytest.raises(InputError, match=r"messy.jsonl:3: invalid JSON"):
        list(iter_traces([messy_jsonl], strict=True))


def test_stats_cli_lenient_and_strict(messy_jsonl, capsys):
    assert main(["traces", "stats", messy_jsonl, "--json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["traces"] == 4 and data["skipped_rows"] == 3 and data["tool_calls"] == 4 * 7
    assert f"{messy_jsonl}:5: field conversations: missing or not a list" in err
    assert main(["traces", "stats", messy_jsonl, "--json", "--strict"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip().startswith(f"trajkit: error: {messy_jsonl}:3: invalid JSON")


def test_stats_tokenizer_comes_from_a_local_folder_only(tmp_path, monkeypatch, capsys):
    """``--tokenizer`` is loaded with ``local_files_only=True`` like everywhere else (it was not), and a
    name that is not a folder is one clear error instead of a hub lookup."""
    import transformers

    calls = []

    class WordTokenizer:  # one token per whitespace-separated word
        def __call__(self, text, add_special_tokens):
            assert add_special_tokens is False
            return {"input_ids": text.split()}

    def from_pretrained(path, **kwargs):
        calls.append((path, kwargs))
        return WordTokenizer()

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", from_pretrained)
    src = _write_jsonl(tmp_path / "q.jsonl", [json.dumps(quirky_row())])
    assert main(["traces", "stats", src, "--tokenizer", str(tmp_path), "--json", "-q"]) == 0
    assert calls == [(str(tmp_path), {"local_files_only": True})]
    data = json.loads(capsys.readouterr().out)
    assert data["think_tokens"] == data["think_words"] == 10  # 1 + 0 + 3 + 3 + 1 + 2, as in test_parse.EXPECTED
    assert main(["traces", "stats", src, "--tokenizer", "Qwen/Qwen3-8B", "-q"]) == 2
    assert "--tokenizer 'Qwen/Qwen3-8B' looks like a hub name" in capsys.readouterr().err
    assert len(calls) == 1


def test_missing_file_is_one_clear_error(tmp_path, capsys):
    assert main(["traces", "stats", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl: no such file" in capsys.readouterr().err


def test_formats_agree(tmp_path):
    rows = [_good(i) for i in range(3)]
    jsonl = _write_jsonl(tmp_path / "a.jsonl", [json.dumps(r) for r in rows])
    gz = tmp_path / "a.jsonl.gz"
    gz.write_bytes(gzip.compress(open(jsonl, "rb").read()))
    js = tmp_path / "a.json"
    js.write_text(json.dumps(rows))
    pq_rows = [dict(r, tools=TOOLS) for r in rows]  # Parquet gives tools as a list of objects
    pq.write_table(pa.Table.from_pylist(pq_rows), tmp_path / "a.parquet")
    results = {}
    for spec in (jsonl, str(gz), str(js), str(tmp_path / "a.parquet")):
        data = compute_stats([spec], progress=False).to_dict(groups=False)
        results[spec] = {k: data[k] for k in ("traces", "tool_calls", "failed_tool_responses", "unknown_tool_calls")}
    assert len({json.dumps(v, sort_keys=True) for v in results.values()}) == 1
    assert results[jsonl] == {"traces": 3, "tool_calls": 21, "failed_tool_responses": 9, "unknown_tool_calls": 6}


def test_hf_datasets_local_repo_with_configs(tmp_path):
    """A folder laid out like the hub repo (one folder per config) loads by name and config."""
    for config, n in (("kimi", 3), ("glm-5.1", 2)):
        (tmp_path / config).mkdir()
        pq.write_table(pa.Table.from_pylist([dict(_good(i), tools=json.dumps(TOOLS)) for i in range(n)]),
                       tmp_path / config / "train-00000.parquet")
    (tmp_path / "README.md").write_text(
        "---\nconfigs:\n- config_name: kimi\n  data_files:\n  - split: train\n    path: kimi/*.parquet\n"
        "- config_name: glm-5.1\n  data_files:\n  - split: train\n    path: glm-5.1/*.parquet\n---\n")
    stats = compute_stats([f"hf:{tmp_path}:kimi", f"hf:{tmp_path}:glm-5.1"], progress=False).to_dict()
    assert stats["traces"] == 5
    assert {k: v["traces"] for k, v in stats["by"]["source"].items()} == {"kimi": 3, "glm-5.1": 2}


def test_source_labels():
    assert source_label("hf:lambda/hermes-agent-reasoning-traces:kimi") == "kimi"
    assert source_label("hf:lambda/hermes-agent-reasoning-traces") == "hermes-agent-reasoning-traces"
    assert source_label("/x/glm-5.1.jsonl.gz") == "glm-5.1"


def test_openai_rows_are_detected(tmp_path):
    row = {"id": "o1", "messages": [{"role": "user", "content": "hi"},
                                    {"role": "assistant", "content": "", "tool_calls": [
                                        {"id": "a", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\": \"ls\"}"}}]},
                                    {"role": "tool", "tool_call_id": "a", "content": "error: denied"}],
           "tools": TOOLS}
    (trace,) = list(iter_traces([_write_jsonl(tmp_path / "o.jsonl", [json.dumps(row)])]))
    assert trace.format == "openai" and trace.messages[1].tool_calls[0].name == "terminal"
    assert trace.messages[2].tool_responses[0].failed


def test_parallel_equals_sequential(messy_jsonl):
    from trajkit.traces.aggregate import CorpusStats
    from trajkit.traces.parallel import parallel_file_stats, plan_chunks

    seq_errors, par_errors = [], []
    seq = compute_stats([messy_jsonl], progress=False, workers=1, on_error=seq_errors.append)
    par = CorpusStats()
    assert len(plan_chunks(messy_jsonl, 2000)) > 3  # several chunks, cut mid-file
    parallel_file_stats(messy_jsonl, "messy", par, workers=2, on_error=par_errors.append, chunk_bytes=2000)
    assert json.dumps(par.to_dict(), sort_keys=True) == json.dumps(seq.to_dict(), sort_keys=True)
    assert [str(e) for e in par_errors] == [str(e) for e in seq_errors]


def test_parallel_progress_counts_every_row(messy_jsonl):
    from trajkit.traces.aggregate import CorpusStats
    from trajkit.traces.parallel import parallel_file_stats

    counted = []
    parallel_file_stats(messy_jsonl, "messy", CorpusStats(), workers=2, on_rows=counted.append, chunk_bytes=2000)
    lines = [line for line in open(messy_jsonl, "rb") if not line.isspace()]
    assert sum(counted) == len(lines) and len(counted) > 3


@pytest.mark.parametrize("how", ["raises", "dies"])
def test_a_failing_stats_worker_fails_the_call(messy_jsonl, monkeypatch, how):
    """A worker that raises (a bug, not a bad row) or dies fails the call naming the file, never hangs it."""
    import os

    from trajkit.traces import parallel
    from trajkit.traces.aggregate import CorpusStats

    parent, fold = os.getpid(), parallel.fold_line

    def failing(*args):
        if os.getpid() != parent:  # the forked workers only: the parent's own head chunk folds as usual
            if how == "dies":
                os._exit(3)
            raise ZeroDivisionError("a bug in a worker")
        return fold(*args)

    monkeypatch.setattr(parallel, "fold_line", failing)
    with pytest.raises(RuntimeError) as caught:
        parallel.parallel_file_stats(messy_jsonl, "messy", CorpusStats(), workers=2, chunk_bytes=2000)
    assert messy_jsonl in str(caught.value)
    assert ("ZeroDivisionError: a bug in a worker" if how == "raises" else "exit code 3") in str(caught.value)


def test_a_folder_as_input_is_one_line(tmp_path, capsys):
    from trajkit.cli.main import main

    assert main(["traces", "stats", str(tmp_path), "-q"]) == 2
    err = capsys.readouterr().err
    assert err == f"trajkit: error: {tmp_path}: is a folder, not a file (name the files inside it, e.g. DIR/*.jsonl)\n"


@pytest.mark.parametrize("command", [["stats"], ["export", "--format", "tokens", "--out", "o.parquet"]])
@pytest.mark.parametrize("spec,message", [
    ("Qwen/Qwen3-8B", "looks like a hub name; trajkit reads local folders only"),
    ("/nonexistent/tok", "is not a local folder"),
])
def test_tokenizer_specs_are_judged_alike(tmp_path, capsys, monkeypatch, command, spec, message):
    from trajkit.cli.main import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "a.jsonl"
    src.write_text('{"conversations": [{"from": "human", "value": "hi"}]}\n')
    assert main(["traces", command[0], str(src), *command[1:], "--tokenizer", spec, "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trajkit: error: --tokenizer {spec!r} ") and message in err and err.count("\n") == 1


def test_tokenizer_folder_without_files_is_one_line(tmp_path, capsys):
    from trajkit.cli.main import main

    src = tmp_path / "a.jsonl"
    src.write_text('{"conversations": [{"from": "human", "value": "hi"}]}\n')
    (tmp_path / "empty").mkdir()
    assert main(["traces", "stats", str(src), "--tokenizer", str(tmp_path / "empty"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trajkit: error: {tmp_path / 'empty'}: --tokenizer: cannot load") and err.count("\n") == 1


def _lines(*rows):
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


GOOD = {"conversations": [{"from": "human", "value": "hi"}]}


@pytest.mark.parametrize("content,message", [
    (lambda: __import__("gzip").compress(_lines(GOOD) * 3), "this is gzip-compressed data, not JSON Lines text "
                                                            "(name it *.jsonl.gz)"),
    (lambda: __import__("lzma").compress(_lines(GOOD)), "this is xz-compressed data"),
    (lambda: bytes(range(256)) * 40 + b"\n" + bytes(range(256)), "this is not UTF-8 text"),
    (lambda: b"\xff\xfe" + "{}\n".encode("utf-16-le") * 50, "this is not UTF-8 text"),
    (lambda: json.dumps([GOOD, GOOD], indent=1).encode(), "this looks like a JSON array, not JSON Lines"),
    (lambda: json.dumps([GOOD, GOOD]).encode() + b"\n", "(name it .json)"),
])
@pytest.mark.parametrize("size", ["small", "parallel"])
def test_not_jsonl_is_said_once(tmp_path, capsys, content, message, size):
    from trajkit.cli.main import main

    path = tmp_path / "x.jsonl"
    data = content()
    path.write_bytes(data if size == "small" else data + b"\n" * (5 << 20))  # > 4 MiB: the parallel path
    assert main(["traces", "stats", str(path), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trajkit: error: {path}: ") and message in err and err.count("\n") == 1


def test_one_binary_line_among_rows_is_one_warning(tmp_path, capsys):
    from trajkit.cli.main import main

    path = tmp_path / "x.jsonl"
    path.write_bytes(_lines(GOOD) + b"\x00\xff\xfe garbage\n" + _lines(GOOD))
    assert main(["traces", "stats", str(path), "--json", "-q"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["traces"] == 2 and cap.err.count(f"{path}:2: ") == 1 and cap.err.count("\n") == 1


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".jsonl.xz"])
def test_rows_are_read_through_a_large_buffer(tmp_path, suffix):
    """Hermes rows are tens of kB: line reads through Python's default 8 kB buffer cost 0.50 s CPU per 832 MB
    (the ``bench traces`` corpus) against 0.17 s through 1 MB. The first line read fills one whole buffer."""
    import lzma

    from trajkit.traces.load import READ_BUFFER, open_bytes

    path = tmp_path / f"rows{suffix}"
    text = b"".join(b"%07d\n" % i for i in range(160_000))  # 1.3 MB of short lines
    opener = {".jsonl": open, ".jsonl.gz": gzip.open, ".jsonl.xz": lzma.open}[suffix]
    with opener(path, "wb") as fh:
        fh.write(text)
    assert READ_BUFFER >= 1 << 20
    with open_bytes(str(path)) as fh:
        assert fh.readline() == b"0000000\n"
        assert fh.raw.tell() >= READ_BUFFER
    assert [line for _, line in iter_lines(str(path))] == text.splitlines(keepends=True)
