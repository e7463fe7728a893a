"""Outputs are atomic and never replace an input: tested by breaking runs half-way and comparing bytes."""
import json
import os

import pytest

from trajkit.cli.main import main
from trajkit.errors import ConfigError
from trajkit.atomic import AtomicFile, refuse_same_file, write_atomic

from .conftest import call, resp


def _row(i):
    return {"id": f"r{i}", "conversations": [
        {"from": "human", "value": "go"},
        {"from": "gpt", "value": "<think>a b</think>\n" + call("terminal", {"command": "ls"})},
        {"from": "tool", "value": resp("terminal", 0, {"output": "ok", "exit_code": 0, "error": None})}]}


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps(_row(i)) + "\n" for i in range(6)))
    return path


@pytest.mark.parametrize("command", [["filter"], ["export", "--format", "openai"]])
@pytest.mark.parametrize("via", ["same", "symlink", "dotted"])
def test_output_equal_to_input_is_refused(corpus, tmp_path, capsys, command, via):
    before = corpus.read_bytes()
    out = {"same": corpus, "dotted": tmp_path / "." / "a.jsonl", "symlink": tmp_path / "link.jsonl"}[via]
    if via == "symlink":
        out.symlink_to(corpus)
    code = main(["traces", command[0], str(corpus), *command[1:], "--out", str(out), "-q"])
    err = capsys.readouterr().err
    assert code == 2
    assert "is the input" in err and err.count("\n") == 1
    assert corpus.read_bytes() == before


def test_refuse_same_file_ignores_other_files_and_hub_names(corpus, tmp_path):
    refuse_same_file([tmp_path / "other.jsonl", "-"], [str(corpus), "hf:x/y:z", "-"])
    with pytest.raises(ConfigError, match="is the input"):
        refuse_same_file([corpus], ["hf:x/y", str(corpus)])


def _interrupt_after(monkeypatch, target, name, n, exc):
    real = getattr(target, name)
    seen = [0]

    def wrapped(*a, **k):
        seen[0] += 1
        if seen[0] > n:
            raise exc
        return real(*a, **k)
    monkeypatch.setattr(target, name, wrapped)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".parquet"])
def test_interrupted_filter_keeps_the_old_output(corpus, tmp_path, capsys, monkeypatch, suffix):
    from trajkit.traces import filters

    out = tmp_path / f"kept{suffix}"
    assert main(["traces", "filter", str(corpus), "--out", str(out), "-q"]) == 0
    complete = out.read_bytes()
    out.write_bytes(complete)  # an earlier complete output under the same name
    _interrupt_after(monkeypatch, filters.RowFilter, "keep", 3, KeyboardInterrupt())
    capsys.readouterr()
    assert main(["traces", "filter", str(corpus), "--out", str(out), "-q"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "trajkit: interrupted (files being written were discarded)"
    assert out.read_bytes() == complete
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.jsonl", out.name])  # no temp file left


def test_export_crash_keeps_the_old_output(corpus, tmp_path, monkeypatch):
    from trajkit.traces.export import sft

    out = tmp_path / "sft.jsonl"
    out.write_bytes(b'{"old": true}\n')
    _interrupt_after(monkeypatch, sft, "openai_row", 2, RuntimeError("boom"))
    with pytest.raises(RuntimeError, match="boom"):
        main(["traces", "export", str(corpus), "--format", "openai", "--out", str(out), "-q"])
    assert out.read_bytes() == b'{"old": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "sft.jsonl"]


def test_atomic_file_syncs_then_renames(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))),
                                                 real_fsync(fd)))
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", str(a), str(b))), real_replace(a, b)))
    target = tmp_path / "x.json"
    target.write_text("old")
    with AtomicFile(target) as tmp:
        tmp.write_text("new")
        assert target.read_text() == "old"  # nothing visible before the commit
    assert target.read_text() == "new"
    assert [e[0] for e in events] == ["fsync", "replace", "fsync"]
    assert events[0][1] == events[1][1] and events[1][2] == str(target) and events[2][1] == str(tmp_path)
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_atomic_file_abort_leaves_the_target(tmp_path):
    target = tmp_path / "x.json"
    target.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with AtomicFile(target) as tmp:
            tmp.write_text("half")
            raise KeyboardInterrupt
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_write_atomic_into_a_missing_folder(tmp_path):
    assert write_atomic(tmp_path / "a" / "b" / "c.txt", "é").read_bytes() == "é".encode()


def test_export_into_a_missing_folder(corpus, tmp_path):
    out = tmp_path / "new" / "deeper" / "sft.jsonl"
    assert main(["traces", "export", str(corpus), "--format", "openai", "--out", str(out), "-q"]) == 0
    assert len(out.read_text().splitlines()) == 6


def test_output_that_is_a_folder_or_under_a_file(corpus, tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "d.jsonl").mkdir()
    assert main(["traces", "filter", str(corpus), "--out", str(tmp_path / "d.jsonl"), "-q"]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["traces", "filter", str(corpus), "--out", str(tmp_path / "afile" / "o.jsonl"), "-q"]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_report_out_existing_file_is_a_message(corpus, tmp_path, capsys):
    target = tmp_path / "report.html"
    target.write_text("keep me")
    assert main(["traces", "report", str(corpus), "--out", str(target), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trajkit: error: --out") and "is a file" in err and err.count("\n") == 1
    assert target.read_text() == "keep me"


@pytest.mark.parametrize("command", [["stats"], ["report", "--out", "REP"], ["filter", "--out", "OUT"],
                                     ["export", "--format", "openai", "--out", "OUT"]])
@pytest.mark.parametrize("content", ["", '{"x": 1}\n'])
def test_no_readable_row_exits_non_zero(tmp_path, capsys, command, content):
    src = tmp_path / "in.jsonl"
    src.write_text(content)
    out = tmp_path / "o.jsonl"
    out.write_text("old\n")
    argv = [a.replace("OUT", str(out)).replace("REP", str(tmp_path / "rep")) for a in command]
    assert main(["traces", argv[0], str(src), *argv[1:], "-q"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(f"trajkit: error: no readable row in {src}: ")
    assert len(err) == (2 if content else 1)  # the one skipped row's warning, then the error
    assert out.read_text() == "old\n" and not (tmp_path / "rep" / "report.html").exists()


def test_dash_reads_stdin_and_writes_stdout(corpus, tmp_path, capsys, monkeypatch):
    import io
    import sys

    data = corpus.read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["traces", "filter", "-", "--out", "-", "-q"]) == 0
    cap = capsys.readouterr()
    assert cap.out.encode() == data  # the rows, byte for byte, on stdout
    assert cap.err.startswith("read 6 rows, kept 6")  # the summary moves to stderr
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["traces", "stats", "-", "--json", "-q"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["traces"] == 6 and list(stats["by"]["source"]) == ["stdin"]


def test_version_flag(capsys):
    from trajkit import version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out == f"trajkit {version()}\n"
