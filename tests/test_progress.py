"""One progress-bar helper: it draws on a terminal and writes nothing when stderr is a pipe, and ``trajkit
train`` piped (``2>&1 | cat``) prints no bar lines (before, tqdm wrote a bar refresh per step into the pipe)."""
import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios

from trajkit.progress import NoBar, progress_bar

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BAR = ("from trajkit.progress import progress_bar\n"
       "with progress_bar(total=4, desc='work', unit='row') as bar:\n"
       "    for _ in range(4):\n"
       "        bar.update()\n")


def _env():
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_bar_writes_nothing_into_a_pipe():
    done = subprocess.run([sys.executable, "-c", BAR], capture_output=True, env=_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == (b"", b"")


def test_bar_draws_on_a_terminal():
    """The same script with stderr on a pseudo-terminal draws the bar (so the pipe test can fail)."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a new pty is 0 columns wide
    proc = subprocess.Popen([sys.executable, "-c", BAR], stderr=child, stdout=subprocess.PIPE, env=_env())
    os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    assert proc.wait(timeout=60) == 0 and proc.stdout.read() == b""
    assert b"work: 100%" in out and b"4/4" in out


def test_disabled_bar_counts_and_draws_nothing(capsys):
    bar = progress_bar(total=3, desc="x", enabled=False)
    assert isinstance(bar, NoBar)
    with bar:
        bar.update()
        bar.update(2)
        bar.set_postfix(a=1)
        bar.write("a line")
    assert bar.n == 3
    assert capsys.readouterr() == ("a line\n", "")


def test_train_piped_prints_no_bar_lines(tmp_path):
    from tests.rl.conftest import TINY

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text("steps: 3\n")
    out_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "trajkit.cli.main", "train", str(cfg), *TINY, "log.dump_samples=0",
                           "eval.every=3", "eval.num_prompts=4", f"log.out_dir={out_dir}"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stdout
    rows = [json.loads(line) for line in open(out_dir / "metrics.jsonl")]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]  # it trained
    lines = done.stdout.splitlines()
    assert "\r" not in done.stdout and "train:" not in done.stdout, done.stdout
    assert len(lines) == 2, done.stdout
    assert lines[0].startswith(f"step 3: eval reward {rows[3]['eval/reward']:.3f} | ")
    assert lines[1] == f"eval reward: {rows[0]['eval/reward']:.3f} -> {rows[3]['eval/reward']:.3f}; logs in {out_dir}"


def test_quiet_transformers():
    import transformers
    from transformers.utils import logging as hf_logging

    from trajkit.progress import quiet_transformers

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_warning()
    hf_logging.enable_progress_bar()
    try:
        quiet_transformers()
        assert hf_logging.get_verbosity() == transformers.logging.ERROR
        assert hf_logging.is_progress_bar_enabled() is False
    finally:
        hf_logging.set_verbosity(level)
        (hf_logging.enable_progress_bar if bars else hf_logging.disable_progress_bar)()
