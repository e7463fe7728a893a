"""The host never follows a path the sandbox or a task controls, and the sandbox's quotas count everything.

Each attack aims a host-side file operation (a build ``COPY``, an ``upload``, a ``download``, ``reset_dir``,
``stop``) through a symbolic link or a tree the sandbox made, at a canary folder on the host made by the test;
the canary's listing, contents, modes and mtimes are compared with the ones taken before. The quota tests
count what a command can take: inodes of the tmpfs, and host disk while it prints 500 MB."""
import errno
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from trajkit.envs.sandbox import namespace as nsbox
from trajkit.envs.sandbox.base import MAX_OUTPUT, Limits, SandboxError, SandboxSpec


def snapshot(folder: Path) -> dict:
    """Every entry under ``folder`` (itself included): kind, mode, mtime and a file's bytes."""
    out = {}
    for path in [folder, *sorted(folder.rglob("*"))]:
        st = os.lstat(path)
        out[str(path)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_mtime_ns,
                          path.read_bytes() if stat.S_ISREG(st.st_mode) else None)
    return out


@pytest.fixture
def canary(tmp_path):
    """A host folder (mode 0750, a file of mode 0640) no sandbox may touch; checked after the test."""
    folder = tmp_path / "canary"
    folder.mkdir()
    (folder / "file").write_text("host data\n")
    os.chmod(folder / "file", 0o640)
    os.chmod(folder, 0o750)
    before = snapshot(folder)
    yield folder
    assert snapshot(folder) == before


@pytest.fixture
def boxes(needs_sandbox):
    """Make namespace sandboxes (a spec's build steps run by ``start``); each is stopped and gone after."""
    made = []

    def make(spec: SandboxSpec | None = None, **limits) -> nsbox.NamespaceSandbox:
        spec = spec or SandboxSpec()
        spec.limits = Limits(**{"memory_mb": 512, "storage_mb": 64, **limits})
        sb = nsbox.NamespaceSandbox(spec)
        made.append(sb)
        sb.start()
        return sb
    yield make
    for sb in made:
        root = sb.root
        sb.stop()
        assert root is None or not root.exists()


def tree(base: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    return base


def test_a_copied_relative_link_cannot_carry_a_later_copy_to_the_host(boxes, canary, tmp_path):
    env = tmp_path / "environment"
    deep = env / "a" / "b" / "c" / "d" / "e" / "f" / "g"
    deep.mkdir(parents=True)
    (deep / "link").symlink_to("../../../../../../..")  # inside environment/ on the host; from /x, the host's /
    assert os.path.realpath(deep / "link") == str(env)
    rel = str(canary).lstrip("/")
    tree(env / "payload", {f"link/{rel}/evil.txt": "written through a link\n", f"link/{rel}/file": "overwritten\n"})
    os.chmod(env / "payload" / "link" / rel, 0o777)  # copystat would give the host folder this mode
    sb = boxes(SandboxSpec(context=env, steps=[("copy", ["a/b/c/d/e/f/g"], "/x"), ("copy", ["payload"], "/x")]))
    assert sb.exec(f"cat /x/link/{rel}/evil.txt", timeout_s=30).stdout == "written through a link\n"


def test_a_link_the_sandbox_made_in_an_upload_target_is_not_followed(boxes, canary, tmp_path):
    sb = boxes()
    assert sb.exec(f"ln -s {canary} /solution/sub", timeout_s=30).ok
    solution = tree(tmp_path / "solution", {"solve.sh": "true\n", "sub/evil.txt": "x\n", "sub/file": "y\n"})
    os.chmod(solution / "sub", 0o777)
    sb.upload(solution, "/solution")
    r = sb.exec("test -L /solution/sub || cat /solution/sub/evil.txt", timeout_s=30)
    assert r.stdout == "x\n"


def test_a_link_planted_at_an_upload_file_is_replaced_not_written_through(boxes, canary, tmp_path):
    sb = boxes()
    agent = tree(tmp_path / "agent", {"shell_agent.py": "print('agent')\n", "instruction.md": "Do it.\n"})
    sb.upload(agent, "/installed-agent")  # the first episode's upload makes the folder, the sandbox's own
    r = sb.exec(f"ln -sf {canary}/file /installed-agent/shell_agent.py", timeout_s=30)
    assert r.ok, r.stderr
    sb.upload(agent, "/installed-agent")  # the next episode's
    r = sb.exec("test -L /installed-agent/shell_agent.py || cat /installed-agent/shell_agent.py", timeout_s=30)
    assert r.stdout == "print('agent')\n"


def test_a_link_made_by_a_build_run_step_cannot_carry_a_copy_to_the_host(boxes, canary, tmp_path):
    env = tree(tmp_path / "environment", {"payload/link/evil.txt": "x\n", "payload/link/file": "y\n"})
    steps = [("run", f"mkdir -p /app/x && ln -s {canary} /app/x/link", None), ("copy", ["payload"], "/app/x")]
    sb = boxes(SandboxSpec(context=env, steps=steps))
    assert sb.exec("cat /app/x/link/evil.txt", timeout_s=30).stdout == "x\n"


def test_download_reads_only_a_bounded_regular_file_and_never_waits(boxes, canary, tmp_path):
    sb = boxes()
    r = sb.exec(f"cd /logs/verifier && head -c 2000000 /dev/zero > big && mkfifo fifo && mkdir dir && "
                f"ln -s {canary}/file link && echo 1 > reward.txt", timeout_s=30)
    assert r.ok, r.stderr
    t0 = time.monotonic()
    for name in ("fifo", "dir", "link", "never"):
        with pytest.raises(FileNotFoundError):
            sb.download(f"/logs/verifier/{name}", tmp_path / name)
        assert not (tmp_path / name).exists()
    assert time.monotonic() - t0 < 5
    with pytest.raises(SandboxError, match="larger than 1048576 bytes"):
        sb.download("/logs/verifier/big", tmp_path / "big")
    sb.download("/logs/verifier/reward.txt", tmp_path / "reward.txt", max_bytes=2)
    assert (tmp_path / "reward.txt").read_text() == "1\n"


def test_many_empty_files_stop_at_the_inode_limit(boxes):
    sb = boxes(storage_mb=4)
    script = ("import os\nn = 0\ntry:\n    while n < 200000:\n        open(f'/tmp/f{n}', 'w').close()\n"
              "        n += 1\nexcept OSError as e:\n    print(n, e.errno)\nelse:\n    print(n, 0)\n")
    n, code = sb.exec(f"python3 -c \"{script}\"", timeout_s=120).stdout.split()
    assert int(code) == errno.ENOSPC and 60_000 < int(n) < Limits().inodes  # what the layout made counts too


def test_printing_500_mb_grows_no_host_disk_and_keeps_the_tail(boxes):
    sb = boxes(storage_mb=8, file_mb=1024)
    free = os.statvfs(sb.root)
    start, lowest, done = free.f_bavail * free.f_frsize, [free.f_bavail * free.f_frsize], threading.Event()

    def sample():
        while not done.wait(0.01):
            st = os.statvfs("/tmp")
            lowest.append(st.f_bavail * st.f_frsize)
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        r = sb.exec("head -c 500000000 /dev/zero; echo END", timeout_s=120)
    finally:
        done.set()
        sampler.join()
    assert r.ok and len(r.stdout) == MAX_OUTPUT and r.stdout.endswith("\0END\n")
    assert start - min(lowest) < 100 << 20  # not the 500 MB printed (other processes may write meanwhile)


DEEP = "python3 -c \"import os\nos.chdir('{at}')\nfor i in range({n}):\n    os.mkdir('d'); os.chdir('d')\""


def test_a_deep_tree_the_sandbox_left_is_removed_and_walked_without_recursion(boxes, tmp_path):
    sb = boxes()
    for at in ("/tests", "/logs/verifier", "/app"):
        assert sb.exec(DEEP.format(at=at, n=2000), timeout_s=60).ok
    sb.reset_dir("/tests")
    sb.reset_dir("/logs/verifier")
    assert sb.exec("ls -A /tests /logs/verifier", timeout_s=30).stdout == "/logs/verifier:\n\n/tests:\n"
    sb.upload(tree(tmp_path / "src", {"d/new.txt": "x\n"}), "/app")
    assert sb.exec("cat /app/d/new.txt", timeout_s=30).stdout == "x\n"
    root = sb.root
    sb.stop()
    assert not root.exists()


def test_a_task_whose_dockerfile_copies_a_link_then_through_it_leaves_the_host_as_it_was(needs_sandbox, canary,
                                                                                           tmp_path):
    from trajkit.envs.harbor.task import load_task
    from trajkit.envs.harbor.trial import AGENTS, run_trial

    task = tmp_path / "task"
    rel = str(canary).lstrip("/")
    tree(task, {"instruction.md": "Do it.\n", "solution/solve.sh": "true\n",
                "tests/test.sh": "cat /x/link/" + rel + "/evil.txt && echo 1 > /logs/verifier/reward.txt\n",
                "task.toml": "[verifier]\ntimeout_sec = 30\n",
                "environment/Dockerfile": "FROM debian\nCOPY a/b/c/d/e/f/g /x\nCOPY payload /x\n",
                f"environment/payload/link/{rel}/evil.txt": "x\n", f"environment/payload/link/{rel}/file": "y\n"})
    (task / "environment" / "a" / "b" / "c" / "d" / "e" / "f" / "g").mkdir(parents=True)
    (task / "environment" / "a" / "b" / "c" / "d" / "e" / "f" / "g" / "link").symlink_to("../../../../../../..")
    result = run_trial(load_task(task), AGENTS["oracle"], "oracle")  # the link stays inside environment/
    assert result.error is None and result.reward == 1.0  # the copy landed in the sandbox's own /x/link


def test_a_wide_tree_is_copied_and_removed_with_few_descriptors(boxes, tmp_path):
    import resource

    src = tmp_path / "wide"
    for i in range(1500):
        (src / f"d{i}" / "sub").mkdir(parents=True)
    sb = boxes()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))  # a walk holding a descriptor per folder fails
    try:
        sb.upload(src, "/tests")
        sb.reset_dir("/tests")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert sb.exec("ls -A /tests | wc -l", timeout_s=30).stdout == "0\n"
