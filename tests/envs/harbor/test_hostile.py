"""Hostile tasks and agents against the namespace sandbox: one test per attack class that once got through
(issue 31), each asserting the host is unchanged where this test's own sandboxes could have touched it: no
marker file in a folder a marker could land in, no folder whose owner or mode changed, no process of the
sandbox's uids alive, no mount of the sandbox's folder left. Every check names only this test's sandboxes
(recorded as they are made), so sandboxes of other tests or processes running beside it do not matter."""
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.envs.conftest import mounts_at_or_under
from tests.envs.harbor.conftest import SHIPPED
from trajkit.envs.sandbox import launcher as launchers, namespace as nsbox, netns, slots
from trajkit.envs.harbor.check import check_tasks
from trajkit.envs.sandbox.base import Limits, SandboxError, SandboxSpec
from trajkit.envs.harbor.task import TaskError, load_task
from trajkit.envs.harbor.trial import AGENTS, run_trial, sandbox_spec

# Folders a marker could land in if the sandbox wrote to the host, and whose owner and mode must not change
WATCHED = ("/", "/tmp", "/var/tmp", "/dev/shm", "/etc", "/root", "/usr", "/usr/local/bin", str(Path.home()))


def _snapshot(extra: tuple[str, ...]) -> dict:
    """Owner, group and mode of each watched folder (None: absent). Folder listings are not compared: other
    processes may write there meanwhile; markers are found by this test's tag instead."""
    out = {}
    for folder in (*WATCHED, *extra):
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            out[folder] = None
            continue
        out[folder] = (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))
    return out


class HostWatch:
    """What this test's sandboxes could have touched, before and after."""

    def __init__(self, tag: str):
        self.tag = tag
        self.made: list[tuple[Path, int]] = []
        self.extra: tuple[str, ...] = ()
        self.before = None

    def watch(self, *paths: str) -> None:
        self.extra += tuple(str(p) for p in paths)
        self.before = _snapshot(self.extra)

    def assert_unchanged(self) -> None:
        assert _snapshot(self.extra) == self.before
        for folder in WATCHED:  # no marker of this test anywhere a write to the host would put it
            if os.path.isdir(folder):
                assert not [n for n in os.listdir(folder) if self.tag in n], folder
        for root, uid in self.made:
            assert not root.exists(), root
            assert mounts_at_or_under(root) == [], root
            assert slots.processes_of(uid) == [], f"processes of sandbox uid {uid} survived"


@pytest.fixture
def host(needs_sandbox, monkeypatch):
    """A :class:`HostWatch`; every sandbox made during the test is recorded, and the host checked after."""
    w = HostWatch(f"hostile-{secrets.token_hex(4)}")
    start = nsbox.NamespaceSandbox.start

    def recorded(self):
        try:
            start(self)
        finally:
            if self.root is not None:
                w.made.append((self.root, self.uid))
    monkeypatch.setattr(nsbox.NamespaceSandbox, "start", recorded)
    w.watch()
    yield w
    w.assert_unchanged()


def make_task(root: Path, name: str, solve: str, test: str, toml: str = "", files: dict | None = None) -> Path:
    """A Harbor task folder: ``solve`` is the Oracle (the attack), ``test`` the verifier's test.sh."""
    d = root / name
    for rel, text in {"instruction.md": "Do the task.\n", "solution/solve.sh": solve, "tests/test.sh": test,
                      "task.toml": "[agent]\ntimeout_sec = 30.0\n[verifier]\ntimeout_sec = 30.0\n" + toml,
                      **(files or {})}.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(text if isinstance(text, bytes) else text.encode())
    return d


REWARD_IF = 'if {cond}; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n'


def oracle(task_dir: Path):
    return run_trial(load_task(task_dir), AGENTS["oracle"], "oracle")


@pytest.fixture(params=["c", "python"])
def launcher(request, monkeypatch):
    """Both builds of the launcher (launch.c, launch.py): the same steps, the same guarantees."""
    from tests.conftest import skip_or_fail

    try:
        built = launchers.launcher(request.param)
    except SandboxError as exc:  # no C compiler: the Python launcher is what runs here
        skip_or_fail(request, f"the compiled launcher cannot be built here: {exc}")
        return None
    monkeypatch.setenv("TRAJKIT_SANDBOX_LAUNCHER", request.param)
    return built


def box(**limits) -> nsbox.NamespaceSandbox:
    sb = nsbox.NamespaceSandbox(SandboxSpec(limits=Limits(**{"memory_mb": 512, "storage_mb": 64, **limits})))
    sb.start()
    return sb


# -- 1. the full escape: / owned by the sandbox, a loader of its own run by a privileged program ---------------

def test_the_root_and_the_userland_never_belong_to_the_sandbox(host, launcher, tmp_path):
    """upload() to /tests and /solution once chowned the overlay's upper root to the sandbox: then /lib64 could
    be replaced by a folder holding the agent's own dynamic loader."""
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "x").write_text("x")
    sb = box()
    try:
        sb.upload(tmp_path / "t", "/tests")
        sb.upload(tmp_path / "t", "/solution")
        sb.upload(tmp_path / "t" / "x", "/top-level-file")
        t = host.tag
        r = sb.exec(f"stat -c %u /; for e in lib64 usr bin etc; do mv /$e /$e.{t} 2>/dev/null && echo moved $e; "
                    f"rm -f /$e 2>/dev/null && echo removed $e; done; mkdir /{t} 2>/dev/null && echo made; "
                    f"ln -s /tmp /lib-{t} 2>/dev/null && echo linked; touch /usr/{t} /etc/{t} /usr/local/bin/{t} "
                    f"2>/dev/null && echo wrote; readlink /lib64", timeout_s=30)
        assert r.stdout == f"65534\n{os.readlink('/lib64')}\n"  # / is a uid outside the namespace; nothing moved
    finally:
        sb.stop()


TROJAN = """#!/usr/bin/python3 -I
import os, sys
caps = [l for l in open("/proc/self/status") if l.startswith(("CapEff", "CapBnd"))]
open(f"/tmp/trojan-{NAME}-{os.getpid()}", "w").write("".join(caps))
os.execv("/usr/lib/trojan/{NAME}", ["{NAME}", *sys.argv[1:]])
"""


def test_nothing_from_the_sandboxs_tree_runs_with_privileges(host, launcher):
    """Every program the sandbox's own tree could hand the exec chain (its sh, env, setpriv, chroot, prlimit,
    unshare) replaced by a trojan that records its capabilities: each one that runs holds only Docker's default
    set less sys_chroot and mknod (never sys_chroot, sys_admin or sys_ptrace), and the first one is the shell."""
    sb = box()
    try:
        upper = sb.root / "disk" / "upper"
        names = ("sh", "env", "setpriv", "chroot", "prlimit", "unshare")
        (upper / "usr" / "lib" / "trojan").mkdir(parents=True)
        (upper / "usr" / "bin").mkdir(parents=True, exist_ok=True)
        for name in names:
            real = os.path.realpath(shutil.which(name))
            (upper / "usr" / "lib" / "trojan" / name).write_bytes(Path(real).read_bytes())
            os.chmod(upper / "usr" / "lib" / "trojan" / name, 0o755)
            (upper / "usr" / "bin" / name).write_text(TROJAN.replace("{NAME}", name))
            os.chmod(upper / "usr" / "bin" / name, 0o755)
        assert sb.exec("echo ran", timeout_s=30).stdout == "ran\n"
        records = {p.name.split("-")[1]: p.read_text() for p in (upper / "tmp").glob("trojan-*")}
        assert set(records) == {"sh"}  # the launcher execs /bin/sh first; no other program of the tree runs
        allowed = sum(1 << c for c in nsbox.CAPS.values())
        for text in records.values():
            eff, bnd = (int(line.split()[1], 16) for line in text.splitlines())
            assert (eff, bnd) == (allowed, allowed) == (0xa00025fb, 0xa00025fb)  # hand-derived from CAPS
    finally:
        sb.stop()


def test_no_chroot_no_ptrace_of_pid_1_and_pid_1_is_not_the_sandboxs(host, launcher):
    sb = box()
    try:
        script = textwrap.dedent("""
            import ctypes, os
            libc = ctypes.CDLL(None, use_errno=True)
            try:
                os.chroot("/tmp"); print("chroot ok")
            except PermissionError:
                print("chroot refused")
            print("ptrace", libc.ptrace(16, 1, 0, 0), ctypes.get_errno())  # PTRACE_ATTACH pid 1: EPERM
            try:
                os.kill(1, 9); print("killed 1")
            except PermissionError:
                print("kill refused")
            print("pid1 uid", os.stat("/proc/1").st_uid)
            """)
        (sb.root / "disk" / "upper" / "tmp" / "probe.py").write_text(script)
        r = sb.exec("python3 /tmp/probe.py", timeout_s=30)
        assert r.stdout.splitlines() == ["chroot refused", "ptrace -1 1", "kill refused", "pid1 uid 65534"]
    finally:
        sb.stop()


def test_another_user_has_no_capabilities_and_a_missing_workdir_exits_126(host, launcher):
    sb = box()
    try:
        r = sb.exec("id -u; grep -E 'CapEff|CapBnd' /proc/self/status | cut -f2", timeout_s=30, user="nobody")
        assert r.stdout.split() == ["65534", "0000000000000000", "0000000000000000"]
        assert slots.processes_of(sb.uid) == []
        r = sb.exec("echo never", timeout_s=30, cwd="/no/such/dir")
        assert (r.exit_code, r.stdout) == (126, "") and "sh: cd: /no/such/dir:" in r.stderr
    finally:
        sb.stop()


# -- 2. workdir traversal ------------------------------------------------------------------------------------

def test_workdir_and_dockerfile_workdir_cannot_leave_the_sandbox(host, tmp_path):
    target = tmp_path / "existing"
    target.mkdir(mode=0o755)
    host.watch(target, f"/tmp/{host.tag}-wd", f"/tmp/{host.tag}-dwd")
    solve = "pwd > where.txt; touch made-here\n"
    test = REWARD_IF.format(cond='[ -f made-here ]')
    toml_made = make_task(tmp_path, "wd", solve, test, f'[environment]\nworkdir = "/../../../../tmp/{host.tag}-wd"\n')
    toml_existing = make_task(tmp_path, "wd-existing", solve, test,
                              f'[environment]\nworkdir = "/../../../..{target}"\n')
    docker = make_task(tmp_path, "dwd", solve, test,
                       files={"environment/Dockerfile": f"FROM debian\nWORKDIR /../../../../tmp/{host.tag}-dwd\n"})
    assert load_task(toml_made).environment.workdir == f"/tmp/{host.tag}-wd"  # normalised, inside the sandbox
    for task_dir in (toml_made, toml_existing, docker):
        result = oracle(task_dir)
        assert result.ok and result.reward == 1.0, result.error  # the folder is made inside the sandbox
    assert stat.S_IMODE(target.stat().st_mode) == 0o755 and target.stat().st_uid == 0 and not os.listdir(target)


# -- 3. symlinked task parts ---------------------------------------------------------------------------------

def test_task_parts_that_link_outside_the_task_are_refused(host, tmp_path):
    secret = tmp_path / "host-secret"
    (secret / "env").mkdir(parents=True)
    (secret / "env" / "data.txt").write_text(f"{host.tag}\n")
    (secret / "instruction.md").write_text("read the host\n")
    (secret / "leak.sh").write_text("echo x > /etc/reward.txt\n")
    base = dict(solve="cat /app/data.txt > out.txt\n", test=REWARD_IF.format(cond="grep -q . /app/out.txt"))
    env_link = make_task(tmp_path / "tasks", "env-link", **base)
    (env_link / "environment").symlink_to(secret / "env")
    instr_link = make_task(tmp_path / "tasks", "instruction-link", **base)
    (instr_link / "instruction.md").unlink()
    (instr_link / "instruction.md").symlink_to(secret / "instruction.md")
    tests_link = make_task(tmp_path / "tasks", "tests-link", **base)
    (tests_link / "tests" / "leak.sh").symlink_to(secret / "leak.sh")
    inside = make_task(tmp_path / "tasks", "inside-link", **base, files={"environment/data.txt": "ok\n"})
    (inside / "tests" / "same.sh").symlink_to("test.sh")  # inside tests/, also once copied: fine
    for task_dir, part in ((env_link, "environment"), (instr_link, "instruction.md"), (tests_link, "tests/leak.sh")):
        with pytest.raises(TaskError, match=f"{part} is a symbolic link to .*outside the task folder"):
            load_task(task_dir)
    rows = {r.task: r for r in check_tasks(tmp_path / "tasks")}
    assert {n: r.verdict for n, r in rows.items()} == {"env-link": "invalid", "instruction-link": "invalid",
                                                       "tests-link": "invalid", "inside-link": "ok"}


def test_copy_sources_stay_inside_the_build_context(host, tmp_path):
    task_dir = make_task(tmp_path, "copy-out", "true\n", REWARD_IF.format(cond="true"),
                         files={"environment/Dockerfile": "FROM debian\nCOPY ../../../../etc/passwd /app/\n"})
    result = oracle(task_dir)
    assert result.failed_phase == "sandbox" and "not a file or folder inside" in result.error


# -- 4. verifier reward hacks --------------------------------------------------------------------------------

JSON_VERIFIER = """cd /app && python3 - <<'EOF'
import json
try:
    ok = json.load(open("/app/answer.json")) == {"answer": 42}
except Exception:
    ok = False
open("/logs/verifier/reward.txt", "w").write("1" if ok else "0")
EOF
"""
PAYLOAD = "import os\nopen('/logs/verifier/reward.txt', 'w').write('1')\nos._exit(0)\n"


@pytest.mark.parametrize("shadow", ["usercustomize", "json-in-workdir", "path-from-image"])
def test_the_verifiers_python_and_tools_cannot_be_shadowed(host, tmp_path, shadow):
    wrong = "echo '{\"answer\": 41}' > /app/answer.json\n"
    if shadow == "usercustomize":
        solve = wrong + ('d=$(python3 -c "import site; print(site.getusersitepackages())"); mkdir -p "$d"; '
                         f"cat > \"$d/usercustomize.py\" <<'PY'\n{PAYLOAD}PY\n")
        task_dir = make_task(tmp_path, shadow, solve, JSON_VERIFIER)
    elif shadow == "json-in-workdir":
        solve = wrong + f"cat > /app/json.py <<'PY'\n{PAYLOAD}PY\n"
        task_dir = make_task(tmp_path, shadow, solve, JSON_VERIFIER)
    else:  # the image puts a folder the agent writes first on PATH; the verifier's PATH is the system's
        solve = wrong + ("mkdir -p /app/bin; printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /app/bin/cmp; "
                         "chmod +x /app/bin/cmp\n")
        test = REWARD_IF.format(cond="echo '{\"answer\": 42}' | cmp -s - /app/answer.json")
        task_dir = make_task(tmp_path, shadow, solve, test,
                             files={"environment/Dockerfile": "FROM debian\nWORKDIR /app\nENV PATH=/app/bin:/usr/bin:/bin\n"})
    result = oracle(task_dir)
    assert result.ok and result.reward == 0.0, (result.error, result.logs)


def test_a_planted_reward_a_fake_tests_folder_and_a_symlinked_log_folder_are_gone(host, tmp_path):
    solve = ("echo 1 > /logs/verifier/reward.txt; echo '{\"reward\": 1}' > /logs/verifier/reward.json; "
             "mkdir -p /app/fake; echo 1 > /app/fake/reward.txt; rm -rf /logs/verifier; ln -s /app/fake /logs/verifier; "
             "rm -rf /tests; mkdir /tests; echo 'echo 1 > /logs/verifier/reward.txt' > /tests/test.sh\n")
    result = oracle(make_task(tmp_path, "plant", solve, "echo 0 > /logs/verifier/reward.txt\n"))
    assert result.ok and result.rewards == {"reward": 0.0}


# -- 5. survivors --------------------------------------------------------------------------------------------

def test_no_process_outlives_its_command(host, launcher):
    sb = box()
    try:
        r = sb.exec("setsid sleep 300 & (setsid sh -c 'sleep 300' &) ; nohup sleep 300 >/dev/null 2>&1 & echo left",
                    timeout_s=30)
        assert r.stdout == "left\n"
        assert slots.processes_of(sb.uid) == []  # gone when exec returns, not only at stop
        r = sb.exec("setsid sleep 300 & sleep 300", timeout_s=0.5)
        assert r.timed_out and slots.processes_of(sb.uid) == []
    finally:
        sb.stop()


KILLED_TRAINER = """
import sys, threading, time
from trajkit.envs.sandbox import launcher as launchers, namespace as nsbox, netns, slots
from trajkit.envs.sandbox.base import Limits, SandboxSpec
sb = nsbox.NamespaceSandbox(SandboxSpec(limits=Limits(memory_mb=512, storage_mb=64)))
sb.start()
threading.Thread(target=sb.exec, args=("setsid sleep 300 & sleep 300",), kwargs={"timeout_s": 600}).start()
while not slots.processes_of(sb.uid):
    time.sleep(0.01)
print(sb.root, sb.uid, flush=True)
time.sleep(600)
"""


def test_a_killed_trainer_leaves_no_process_and_its_folder_is_cleaned(host, capsys):
    child = subprocess.Popen([sys.executable, "-c", KILLED_TRAINER], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[3])
    root, uid = child.stdout.readline().split()
    root, uid = Path(root), int(uid)
    host.made.append((root, uid))
    child.send_signal(signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 10
    while slots.processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert slots.processes_of(uid) == []  # the parent-death signal took the namespace down
    assert os.path.ismount(root / "disk") and root in slots.stale_sandboxes()
    from trajkit.cli.main import main

    assert main(["envs", "clean"]) == 0
    assert f"removed {root}" in capsys.readouterr().out
    assert not root.exists()


def test_a_new_sandbox_removes_a_stale_one(host, tmp_path):
    stale = Path(slots.tempfile.gettempdir()) / f"{slots.PREFIX}{slots.SLOTS - 1}"
    if stale.exists():
        pytest.skip(f"slot {stale} is in use")
    stale.mkdir()
    (stale / "owner").write_text("999999999 0\n")  # a pid that cannot exist
    host.made.append((stale, slots.UID_BASE + (slots.SLOTS - 1) * slots.UID_SPAN))
    box().stop()
    assert not stale.exists()


# -- 6. limits of 0 are not "no limit" -----------------------------------------------------------------------

def test_a_limit_of_zero_or_less_is_refused(host, tmp_path):
    for key in ("storage_mb = 0", "memory_mb = -1", "cpus = 0"):
        task_dir = make_task(tmp_path, f"lim-{key.split()[0]}", "true\n", "true\n", f"[environment]\n{key}\n")
        with pytest.raises(TaskError, match=f"field environment.{key.split()[0]}: must be > 0"):
            load_task(task_dir)
    for name in ("storage_mb", "memory_mb", "nproc", "file_mb"):
        with pytest.raises(SandboxError, match=f"Limits.{name} must be a positive number"):
            Limits(**{name: 0})
    with pytest.raises(SandboxError, match="Limits.storage_mb"):
        sandbox_spec(load_task(SHIPPED / "hello-file"), storage_mb=0)


# -- 7. bad bytes and bad values never crash the folder ------------------------------------------------------

def test_bad_bytes_and_nul_bytes_are_one_invalid_row_each(host, tmp_path, capsys):
    root = tmp_path / "tasks"
    shutil.copytree(SHIPPED / "hello-file", root / "good")
    base = dict(solve="true\n", test="echo 0 > /logs/verifier/reward.txt\n")
    make_task(root, "bad-instruction", **base, files={"instruction.md": b"caf\xe9 \xff\n"})
    make_task(root, "bad-toml-bytes", **base, toml="[metadata]\nnote = \"\xff\"\n")
    (root / "bad-toml-bytes" / "task.toml").write_bytes(b"[metadata]\nnote = \"\xff\"\n")
    make_task(root, "bad-dockerfile", **base, files={"environment/Dockerfile": b"FROM x\nENV A=\xfe\n"})
    make_task(root, "nul-workdir", **base, toml='[environment]\nworkdir = "/app\\u0000x"\n')
    make_task(root, "nul-env-value", **base, toml='[verifier.env]\nA = "x\\u0000y"\n')
    make_task(root, "nul-env-key", **base, toml='[verifier.env]\n"A\\u0000" = "x"\n')
    make_task(root, "eq-env-key", **base, toml='[solution.env]\n"A=B" = "x"\n')
    rows = {r.task: r for r in check_tasks(root)}
    assert rows.pop("hello-file").verdict == "ok"  # the copy of hello-file keeps its [task] name
    expected = {"bad-instruction": ("instruction.md", "not UTF-8 text (byte 3"),
                "bad-toml-bytes": ("task.toml", "not UTF-8 text"),
                "bad-dockerfile": ("environment/Dockerfile", "not UTF-8 text"),
                "nul-workdir": ("task.toml", "field environment.workdir: must be an absolute path without NUL"),
                "nul-env-value": ("task.toml", "field verifier.env: variable 'A'"),
                "nul-env-key": ("task.toml", "field verifier.env: variable 'A\\x00'"),
                "eq-env-key": ("task.toml", "field solution.env: variable 'A=B'")}
    assert {n: r.verdict for n, r in rows.items()} == dict.fromkeys(expected, "invalid")
    for name, (file, message) in expected.items():
        assert f"{name}/{file}" in rows[name].detail and message in rows[name].detail, rows[name].detail
    from trajkit.cli.main import main

    assert main(["envs", "check", str(root)]) == 1
    assert "1 of 8 tasks ok; 7 failed" in capsys.readouterr().out


# -- what was blocked before stays blocked (cheap ones) ------------------------------------------------------

def test_host_processes_and_a_host_loopback_service_are_out_of_reach(host):
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    sb = box()
    try:
        r = sb.exec(f"ps -e -o pid= | wc -l; python3 -c 'import socket; s=socket.socket(); s.settimeout(2); "
                    f"print(s.connect_ex((\"127.0.0.1\", {port})))'", timeout_s=30)
        n, code = r.stdout.split()
        assert int(n) <= 4 and code == "111"  # pid 1, sh, ps, wc; ECONNREFUSED: its loopback is its own
    finally:
        sb.stop()
        srv.close()


def test_a_wrong_solution_with_a_background_reward_writer_scores_zero(host, tmp_path):
    solve = ("(while true; do echo 1 > /logs/verifier/reward.txt 2>/dev/null; sleep 0.01; done) & "
             "setsid sh -c 'while true; do echo 1 > /logs/verifier/reward.txt 2>/dev/null; sleep 0.01; done' & "
             "echo 41 > /app/answer.txt\n")
    test = REWARD_IF.format(cond='[ "$(cat /app/answer.txt)" = 42 ]') + "sleep 0.2\n"
    result = oracle(make_task(tmp_path, "writer", solve, test))
    assert result.ok and result.reward == 0.0


# -- 8. a task with the network gets a private one -----------------------------------------------------------

def test_a_task_with_the_network_gets_a_private_namespace_not_the_hosts(host, request):
    """Harbor's default: a private network with outbound access. The host's loopback services, its Unix sockets
    and its interfaces stay out of reach (slirp4netns --disable-host-loopback); a route out exists."""
    import socket

    from tests.conftest import skip_or_fail

    if netns.network_available():
        skip_or_fail(request, netns.network_available())
        return

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    usrv = socket.socket(socket.AF_UNIX)
    usrv.bind(f"\0{host.tag}")  # an abstract Unix socket, as Ray's and many daemons' are: per network namespace
    usrv.listen()
    sb = box(network=True)
    try:
        script = textwrap.dedent(f"""
            import socket
            for addr in ("127.0.0.1", "10.0.2.2"):
                s = socket.socket(); s.settimeout(3); print(addr, s.connect_ex((addr, {port})))
            u = socket.socket(socket.AF_UNIX)
            print("abstract", u.connect_ex("\\0{host.tag}"))
            """)
        (sb.root / "disk" / "upper" / "tmp" / "net.py").write_text(script)
        r = sb.exec("ip -o link | cut -d: -f2 | tr -d ' ' | sort | tr '\\n' ' '; echo; ip route | head -1; "
                    "cat /etc/resolv.conf; python3 /tmp/net.py", timeout_s=30)
        assert r.stdout.splitlines() == ["lo tap0 ", "default via 10.0.2.2 dev tap0 ", "nameserver 10.0.2.3",
                                         "127.0.0.1 111", "10.0.2.2 101", "abstract 111"], r.stderr
        # ECONNREFUSED: the loopback is the sandbox's own; ENETUNREACH: slirp4netns refuses the host's
    finally:
        sb.stop()
        srv.close()
        usrv.close()


def test_the_compiled_launcher_is_used_only_from_a_folder_no_one_else_writes(tmp_path, monkeypatch):
    """It runs as root: a cache folder that another user can write could swap it. Then the Python one is used."""
    monkeypatch.setenv("TRAJKIT_CACHE", str(tmp_path))
    monkeypatch.setattr(launchers, "_LAUNCHER", None)
    (tmp_path / "sandbox").mkdir(mode=0o777)
    os.chmod(tmp_path / "sandbox", 0o777)
    with pytest.raises(SandboxError, match="not owned by this user alone"):
        launchers.launcher("c")
    assert launchers.launcher() == [sys.executable, "-I", "-S", str(launchers.LAUNCHER)]
    os.chmod(tmp_path / "sandbox", 0o755)
    monkeypatch.setattr(launchers, "_LAUNCHER", None)
    if shutil.which("cc") or shutil.which("gcc"):
        built = launchers.launcher()
        assert built == [str(next((tmp_path / "sandbox").glob("launch-*")))] and os.access(built[0], os.X_OK)


def test_a_network_that_cannot_be_attached_leaves_no_process(host, monkeypatch):
    """slirp4netns failing (here: made to fail) ends the command it was for instead of leaving it waiting."""
    def broken(outer, ready, timeout_s=10.0):
        raise SandboxError("slirp4netns could not configure the sandbox's network: made to fail")
    sb = box()
    sb.spec.limits.network = True
    monkeypatch.setattr(nsbox, "attach_network", broken)
    try:
        with pytest.raises(SandboxError, match="made to fail"):
            sb.exec("sleep 300", timeout_s=30)
        assert slots.processes_of(sb.uid) == [] and sb._proc is None
    finally:
        sb.stop()
