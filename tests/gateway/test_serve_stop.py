"""``trajkit serve --save-dir`` loses nothing however it is stopped: a real ``trajkit serve`` process on a
loopback port (a tiny random model), three calls in two sessions, then SIGINT, SIGTERM or SIGKILL.

The reference is what the live server answered: the sampled ids in each response (``return_token_ids``) and
its own ``/trajkit/sessions/{id}/samples`` view fetched before the stop. What the model writes does not
matter (a random model; the assertions compare the files with the server's answers, never with fixed text).
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from trajkit.gateway.export import session_samples
from trajkit.gateway.persist import sessions_from_records
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer

ROOT = Path(__file__).resolve().parents[2]
CALLS = [("s-a", "Say hi."), ("s-b", "List the files."), ("s-a", "Again.")]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-serve")
    build_model(TinySpec(vocab_size=259, hidden_size=32, max_positions=1024), seed=0, init_scale=5.0
                ).save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    return str(folder)


def _start(model_dir: str, save_dir: Path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "trajkit.cli.main", "serve", "--model", model_dir,
                             "--port", "0", "--model-name", "tiny", "--save-dir", str(save_dir)],
                            stderr=subprocess.PIPE, text=True, env=env, cwd=str(ROOT), preexec_fn=_default_sigint)
    deadline, seen = time.time() + 180, []
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        m = re.search(r"running on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, f"http://127.0.0.1:{m.group(1)}"
    proc.kill()
    raise AssertionError("trajkit serve did not start:\n" + "".join(seen))


def _default_sigint() -> None:
    """A job started in the background by a non-interactive shell inherits SIGINT ignored, and Python then
    installs no KeyboardInterrupt handler (uvicorn still stops on it and the files are still written, but
    the exit status would be 0, not 130): the child gets the default, as a terminal's Ctrl-C finds it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _post(url: str, body: dict, sid: str) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json",
                                                                  "x-session-id": sid})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


def _calls(base: str) -> tuple[list[tuple[str, list[int]]], dict[str, list]]:
    sampled = []
    for sid, text in CALLS:
        out = _post(base + "/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": text}],
                                                    "max_tokens": 6, "seed": 1, "return_token_ids": True}, sid)
        sampled.append((sid, out["choices"][0]["token_ids"]))
    samples = {sid: _get(f"{base}/trajkit/sessions/{sid}/samples")["data"] for sid in ("s-a", "s-b")}
    return sampled, samples


def _records(path: Path) -> list[tuple[str, list[int]]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [(r["session"], r["choices"][0]["token_ids"]) for r in rows]


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_orderly_stop_writes_every_file(model_dir, tmp_path, sig, code):
    proc, base = _start(model_dir, tmp_path / "gw")
    try:
        sampled, live_samples = _calls(base)
        proc.send_signal(sig)
        err = proc.communicate(timeout=120)[1]
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert _records(tmp_path / "gw" / "records.jsonl") == sampled
    saved = [json.loads(line) for line in (tmp_path / "gw" / "samples.jsonl").read_text().splitlines()]
    assert saved == live_samples["s-a"] + live_samples["s-b"]
    hermes = [json.loads(line) for line in (tmp_path / "gw" / "hermes.jsonl").read_text().splitlines()]
    assert sorted(r["session"] for r in hermes) == sorted(s["metadata"]["session"] for s in saved)
    assert "3 call(s) of 2 session(s)" in err


def test_sigkill_loses_no_finished_call(model_dir, tmp_path):
    proc, base = _start(model_dir, tmp_path / "gw")
    try:
        sampled, live_samples = _calls(base)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert _records(tmp_path / "gw" / "records.jsonl") == sampled  # appended as each call finished
    rebuilt = {s.id: session_samples(s) for s in sessions_from_records(tmp_path / "gw" / "records.jsonl")}
    assert rebuilt == live_samples  # the records alone rebuild what the server would have saved


def test_a_save_dir_with_an_earlier_run_is_refused(model_dir, tmp_path):
    (tmp_path / "gw").mkdir()
    (tmp_path / "gw" / "records.jsonl").write_text('{"session": "old"}\n')
    out = subprocess.run([sys.executable, "-m", "trajkit.cli.main", "serve", "--model", model_dir,
                          "--save-dir", str(tmp_path / "gw")], capture_output=True, text=True, cwd=str(ROOT),
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.returncode == 2 and "already holds an earlier run's records" in out.stderr
    assert (tmp_path / "gw" / "records.jsonl").read_text() == '{"session": "old"}\n'
