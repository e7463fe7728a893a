"""The sandbox seam's conformance suite (every backend: the namespace sandbox, Docker where a daemon answers)
and the namespace sandbox's containment: what a task tries (writing outside its root, reading the host's home,
reaching a non-loopback address, fork-bombing, running past its time limit, filling the disk) is stopped,
and the host is left as it was."""
import os
import secrets
import textwrap
from pathlib import Path

import pytest

from tests.envs.conftest import mounts_at_or_under
from trajkit.envs.sandbox import docker, namespace as nsbox
from trajkit.envs.sandbox.registry import make_sandbox
from trajkit.envs.sandbox.base import Limits, SandboxError, SandboxSpec


@pytest.fixture(params=["namespace", "docker"])
def box(request):
    if request.param == "namespace":
        request.getfixturevalue("needs_sandbox")
    elif docker.available():
        pytest.skip(f"docker sandbox: {docker.available()}")
    sandbox = make_sandbox(request.param, SandboxSpec(limits=Limits(memory_mb=512, storage_mb=64)))
    sandbox.start()
    yield sandbox
    sandbox.stop()


def test_exec_runs_in_the_workdir_with_env_exit_code_and_output(box):
    r = box.exec('pwd; echo "$GREETING"; echo oops >&2; exit 3', timeout_s=30, env={"GREETING": "hi there"})
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (3, "/app\nhi there\n", "oops\n", False)
    assert box.exec("pwd", timeout_s=30, cwd="/tmp").stdout == "/tmp\n"
    assert box.exec("id -u", timeout_s=30).stdout == "0\n"
    assert box.exec("id -un", timeout_s=30, user="nobody").stdout == "nobody\n"


def test_files_persist_between_commands_and_round_trip(box, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"alpha\n")
    (src / "sub" / "b.bin").write_bytes(bytes(range(256)))
    box.upload(src, "/tests")
    r = box.exec("cat /tests/a.txt && wc -c < /tests/sub/b.bin && echo made > /app/out.txt", timeout_s=30)
    assert r.stdout == "alpha\n256\n"
    assert box.exec("cat out.txt", timeout_s=30).stdout == "made\n"
    box.download("/app/out.txt", tmp_path / "out.txt")
    box.download("/tests/sub/b.bin", tmp_path / "b.bin")
    assert (tmp_path / "out.txt").read_bytes() == b"made\n" and (tmp_path / "b.bin").read_bytes() == bytes(range(256))
    with pytest.raises(FileNotFoundError):
        box.download("/app/never.txt", tmp_path / "never")


def test_a_command_past_its_time_limit_is_killed_with_its_children(box):
    r = box.exec("(sleep 60 &); sleep 60 & echo started; sleep 60", timeout_s=0.5)
    assert r.timed_out and r.exit_code is None and r.stdout == "started\n" and r.seconds < 20
    assert box.exec("echo after", timeout_s=30).stdout == "after\n"


# -- the namespace sandbox's containment -----------------------------------------------------------------------

def host_state() -> dict:
    """What a sandbox must not change on the host (its own mounts are checked by name: other sandboxes may be
    running beside this test)."""
    home = Path.home()
    return {"/": sorted(os.listdir("/")), "/etc": sorted(os.listdir("/etc")), "home": sorted(os.listdir(home))}


def uid_processes(uid: int) -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1] == str(uid):
            out.append(int(pid))
    return out


@pytest.fixture
def contained(needs_sandbox):
    """A namespace sandbox; afterwards the host is as before, and no process of the sandbox's uid is left."""
    before = host_state()
    made = []

    def make(**limits):
        sb = nsbox.NamespaceSandbox(SandboxSpec(limits=Limits(**{"memory_mb": 512, "storage_mb": 64, **limits})))
        sb.start()
        made.append(sb)
        return sb
    yield make
    for sb in made:
        root = sb.root
        sb.stop()
        assert root is not None and not root.exists()
        assert mounts_at_or_under(root) == []
        assert uid_processes(sb.uid) == []
    assert host_state() == before


def test_writes_outside_the_sandbox_root_never_reach_the_host(contained):
    sb = contained()
    tag = secrets.token_hex(4)
    r = sb.exec(f"echo x > /etc/escape-{tag}; echo x > /escape-{tag}; echo x > /usr/bin/escape-{tag}; "
                f"mkdir -p /tmp/escape-{tag} /root/escape-{tag} && echo ok", timeout_s=30)
    assert r.stderr.count("Permission denied") == 3 and r.stdout == "ok\n"  # /tmp and /root are the sandbox's own
    for path in (f"/etc/escape-{tag}", f"/escape-{tag}", f"/usr/bin/escape-{tag}", f"/tmp/escape-{tag}",
                 f"{Path.home()}/escape-{tag}"):
        assert not os.path.exists(path)
    r = sb.exec("mkdir /x && chroot /x /bin/true", timeout_s=30)  # no second chroot, no mounts
    assert r.exit_code != 0
    assert sb.exec("mount -t tmpfs t /tmp", timeout_s=30).exit_code != 0


def test_the_hosts_home_and_work_folders_are_not_visible(contained, tmp_path):
    marker = Path.home() / f".trajkit-escape-{secrets.token_hex(4)}"
    marker.write_text("secret")
    try:
        sb = contained()
        r = sb.exec(f"cat {marker}; cat {__file__}; find {Path.home()} /home /work /tmp /old_root -mindepth 1 | wc -l",
                    timeout_s=30)
        assert r.stdout == "0\n"  # every one of those folders is empty (or absent: a HOME under /work is)
        assert f"cat: {marker}: No such file" in r.stderr and f"cat: {__file__}: No such file" in r.stderr
    finally:
        marker.unlink()


def test_no_address_but_loopback_is_reachable(contained):
    sb = contained()
    script = textwrap.dedent("""
        import socket
        for host in ("8.8.8.8", "10.0.0.1", "192.168.1.1"):
            s = socket.socket()
            s.settimeout(2)
            print(host, s.connect_ex((host, 80)))
        srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
        c = socket.create_connection(srv.getsockname(), timeout=2); a, _ = srv.accept(); c.sendall(b"ping")
        print("loopback", a.recv(4).decode())
        """)
    r = sb.exec(f"python3 -c '{script}'", timeout_s=30)
    assert r.stdout.splitlines() == ["8.8.8.8 101", "10.0.0.1 101", "192.168.1.1 101", "loopback ping"]  # ENETUNREACH


def test_process_count_memory_file_size_and_disk_are_limited(contained):
    sb = contained(nproc=16, memory_mb=256, file_mb=1, storage_mb=8)
    forks = ("import os, time\nn = 0\ntry:\n    while n < 100:\n        if os.fork() == 0:\n            time.sleep(30)\n"
             "        n += 1\nexcept OSError as e:\n    print(n, e.errno)\n")
    n, errno = sb.exec(f"python3 -c '{forks}'", timeout_s=30).stdout.split()
    assert int(n) < 16 and errno == "11"  # EAGAIN at the nproc limit (the shell and python count too)
    r = sb.exec("python3 -c 'b = bytearray(512 << 20)'", timeout_s=30)
    assert r.exit_code != 0 and "MemoryError" in r.stderr
    r = sb.exec("head -c 2000000 /dev/zero > /app/big; echo $?; wc -c < /app/big", timeout_s=30)
    assert r.stdout.split()[1] == str(1 << 20)  # cut at file_mb
    r = sb.exec("for i in 1 2 3 4 5 6 7 8 9 10; do head -c 1000000 /dev/zero > /app/f$i || exit 1; done", timeout_s=30)
    assert r.exit_code == 1 and "No space left on device" in r.stderr  # storage_mb: the tmpfs is full


def test_a_fork_bomb_is_stopped_and_leaves_nothing(contained):
    sb = contained(nproc=32)
    r = sb.exec("bomb() { bomb | bomb & }; bomb; sleep 60", timeout_s=1)
    assert r.timed_out and r.seconds < 30


def test_uploads_refuse_paths_through_symlinks(contained, tmp_path):
    sb = contained()
    sb.exec("ln -s /etc /app/link", timeout_s=30)
    (tmp_path / "f").write_text("x")
    with pytest.raises(SandboxError, match="/app/link is a symbolic link"):
        sb.upload(tmp_path / "f", "/app/link/passwd")
    with pytest.raises(SandboxError, match="without '..'"):
        sb.upload(tmp_path / "f", "/app/../etc/passwd")
