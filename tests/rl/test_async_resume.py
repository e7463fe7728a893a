"""An asynchronous run killed with ``kill -9`` and resumed from its last checkpoint trains every prompt of
every epoch exactly once: the checkpoint saves the cursor of the first prompt not yet *trained* (the
producer's buffered and in-flight batches are regenerated); the resumed run passes ``trajkit audit run``'s
staleness check."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from trajkit.audit.loader import epoch_problems
from trajkit.audit.rewards import run_checks

from .conftest import TINY

ROWS, STEPS, KILL_AFTER = 10, 40, 8


def _train(tmp_path: Path, out: str, *extra: str) -> subprocess.Popen:
    data = tmp_path / "rows.jsonl"
    if not data.exists():
        data.write_text("".join(json.dumps({"prompt": f"w{i}x", "answer": f"w{i}x"}) + "\n" for i in range(ROWS)))
    args = [a for a in TINY if not a.startswith(("task.", "log.dump"))]
    cmd = [sys.executable, "-m", "trajkit.cli.main", "train", "rep", *args, "task.name=dataset",
           f"task.path={data}", "rewards=[trajkit.envs.single_turn:exact_match]", "eval.every=0", f"steps={STEPS}",
           "rollout.mode=async", "rollout.max_staleness=2", "checkpoint.every=4", "draft.kind=none",
           "draft.distill=false", "shaping.overlong_buffer=3", f"log.out_dir={tmp_path / out}", *extra]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _metrics(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]


def test_kill_9_and_resume_trains_every_prompt_once(tmp_path):
    first = _train(tmp_path, "killed")
    ckpt = tmp_path / "killed" / "checkpoints" / f"step_{KILL_AFTER:06d}"
    deadline = time.monotonic() + 300
    while not (ckpt / "trainer_state.pt").exists():
        assert first.poll() is None, first.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "no checkpoint in 300 s"
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert first.returncode == -signal.SIGKILL
    resumed = _train(tmp_path, "resumed", f"checkpoint.resume_from={ckpt}")
    output, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, output[-3000:]

    before = [m for m in _metrics(tmp_path / "killed") if KILL_AFTER >= m["step"] >= 1]
    after = _metrics(tmp_path / "resumed")
    assert [m["step"] for m in before + after] == list(range(1, STEPS + 1))
    draws = [(m["step"], r) for m in before + after for r in m["data/rows"]]
    n = after[0]["data/num_rows"]
    assert n == ROWS and len(draws) == STEPS * 2  # 2 prompts per step, 8 epochs of 10 rows
    assert epoch_problems(draws, n) == []  # each epoch: every row once, none twice, none skipped
    assert max(m["async/staleness_max"] for m in after) <= 2
    checks = {c.id: c for c in run_checks([str(tmp_path / "resumed")])}
    assert checks["run.staleness"].verdict == "PASS"


def test_the_check_above_sees_a_lost_batch():
    """Guards the test: a resume that skipped the batches the producer had drawn ahead would lose rows."""
    draws = [(s, r) for s, rows in enumerate([[0, 1], [2, 3], [6, 7], [8, 9], [4, 5]]) for r in rows]
    assert epoch_problems(draws, 10) == []
    skipped = draws[:4] + draws[6:] + [(5, 0), (5, 1)]  # rows 4, 5 drawn ahead and lost, the epoch refilled
    assert epoch_problems(skipped, 10) != []
