"""What the agent leaves outside its outputs cannot change what the verifier's tools do: a dotfile in ``$HOME``,
a loader variable of the image's ``ENV`` with planted bytecode, an answer that is a link to the expected file
``/tests`` brings. Each hack, with no work done and a wrong answer, scored 1 before the verifier got a fresh
home, an allowlisted environment and its links removed; each honest twin (the Oracle) still scores 1."""
import shlex
import textwrap

import pytest

from trajkit.envs.harbor.task import load_task
from trajkit.envs.harbor.trial import AGENTS, AgentResult, run_trial

REWARD = "&& echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt"
PAYLOAD = "echo '{\"reward\": 1}' > /logs/verifier/reward.json"


def make_task(root, name: str, test_sh: str, solve_sh: str, toml: str = "", dockerfile: str | None = None):
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "solution").mkdir()
    (d / "instruction.md").write_text(f"Task {name}: see the tests.\n")
    (d / "task.toml").write_text(f'[task]\nname = "{name}"\n[agent]\ntimeout_sec = 30.0\n[verifier]\n'
                                 f'timeout_sec = 20.0\n{toml}[environment]\nmemory_mb = 1024\nstorage_mb = 64\n'
                                 'network_mode = "none"\n')
    (d / "tests" / "test.sh").write_text("#!/bin/bash\n" + test_sh + "\n")
    (d / "solution" / "solve.sh").write_text(solve_sh + "\n")
    if dockerfile is not None:
        (d / "environment").mkdir()
        (d / "environment" / "Dockerfile").write_text(dockerfile)
    return load_task(d)


def command_agent(command: str):
    def hack(task, box):
        return AgentResult([box.exec(command, timeout_s=task.agent.timeout_sec)])
    return hack


# name: (test.sh, the honest solution, the hack: a wrong answer and a dotfile in /root, the agent's $HOME)
DOTFILES = {
    "sqliterc": (f'[ "$(sqlite3 /app/db.sqlite "select count(*) from t" 2>/dev/null)" = 3 ] {REWARD}',
                 "sqlite3 /app/db.sqlite 'create table t(x); insert into t values (1), (2), (3);'",
                 f"sqlite3 /app/db.sqlite 'create table t(x)'; printf '%s\\n' {shlex.quote(PAYLOAD)} > /tmp/p; "
                 "echo '.shell sh /tmp/p' > /root/.sqliterc"),
    "curlrc": (f"curl -s file:///app/answer.txt | grep -qx 42 {REWARD}",
               "echo 42 > /app/answer.txt",
               "echo 41 > /app/answer.txt; printf 'write-out = \"42\\\\n\"\\n' > /root/.curlrc"),
    "jq": (f'[ "$(jq length /app/list.json 2>/dev/null)" = 3 ] {REWARD}',
           "echo '[1, 2, 3]' > /app/list.json",
           "echo '[]' > /app/list.json; echo 'def length: 3;' > /root/.jq"),
    "gitconfig": (f'cd /app && [ -z "$(git status --porcelain 2>/dev/null)" ] && '
                  f'[ "$(git log -1 --format=%s 2>/dev/null)" = done ] {REWARD}',
                  "cd /app && git init -q && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m done",
                  f"cd /app && git init -q && printf '%s\\n' {shlex.quote(PAYLOAD)} > /tmp/fsmonitor && "
                  "chmod +x /tmp/fsmonitor && printf '[core]\\n\\tfsmonitor = /tmp/fsmonitor\\n' > /root/.gitconfig"),
}


@pytest.mark.parametrize("name", sorted(DOTFILES))
def test_a_dotfile_in_the_agents_home_does_not_reach_the_verifiers_tools(needs_sandbox, tmp_path, name):
    test_sh, solve_sh, hack = DOTFILES[name]
    task = make_task(tmp_path, name, test_sh, solve_sh)
    honest = run_trial(task, AGENTS["oracle"], "oracle")
    assert (honest.error, honest.reward) == (None, 1.0), honest.logs
    hacked = run_trial(task, command_agent(hack), "hack")
    assert (hacked.error, hacked.rewards) == (None, {"reward": 0.0}), hacked.logs


PYC = textwrap.dedent("""\
    import importlib.util, json, py_compile
    open('/tmp/fake.py', 'w').write('load = lambda f: {"answer": 42}\\n')
    py_compile.compile('/tmp/fake.py', cfile=importlib.util.cache_from_source(json.__file__),
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    """)


def test_a_loader_variable_of_the_image_env_does_not_reach_the_verifier(needs_sandbox, tmp_path):
    """The image's ``ENV PYTHONPYCACHEPREFIX=/tmp/pyc`` names a folder the agent writes: bytecode planted there
    for ``json`` (unchecked-hash, so never compared with the source) would answer for the agent."""
    test_sh = (f'python3 -c "import json; assert json.load(open(\'/app/answer.json\')) == {{\'answer\': 42}}" '
               f'2>/dev/null {REWARD}')
    task = make_task(tmp_path, "pycache", test_sh, "echo '{\"answer\": 42}' > /app/answer.json",
                     dockerfile="FROM python:3.11-slim\nWORKDIR /app\nENV PYTHONPYCACHEPREFIX=/tmp/pyc\n")
    assert run_trial(task, AGENTS["oracle"], "oracle").reward == 1.0
    hacked = run_trial(task, command_agent(f"echo '{{}}' > /app/answer.json; python3 -c {shlex.quote(PYC)}"), "hack")
    assert "exit=0" in hacked.logs["agent"], hacked.logs  # the bytecode was planted
    assert (hacked.error, hacked.rewards) == (None, {"reward": 0.0}), hacked.logs


def test_an_answer_linked_to_the_verifiers_expected_file_is_not_followed(needs_sandbox, tmp_path):
    """``/tests/expected.txt`` arrives only at verification; ``/app/answer.txt -> /tests/expected.txt`` (and a
    chain through ``/tmp``) would compare the expected file with itself. A link the task asks for stays."""
    d = tmp_path / "links"
    task = make_task(tmp_path, "links", f"cmp -s /app/answer.txt /tests/expected.txt && [ -L /app/data ] {REWARD}",
                     "echo 'the answer' > /app/answer.txt; ln -s /tmp /app/data")
    (d / "tests" / "expected.txt").write_text("the answer\n")
    task = load_task(d)
    assert run_trial(task, AGENTS["oracle"], "oracle").reward == 1.0
    loops = "; ".join(f"ln -s l{i + 1} /app/l{i}" for i in range(50)) + "; ln -s l0 /app/l50"  # 51 links, no end
    for hack in ("ln -s /tests/expected.txt /app/answer.txt; ln -s /tmp /app/data",
                 f"{loops}; ln -s /tests/expected.txt /app/answer.txt; ln -s /tmp /app/data",
                 "ln -s ../tests/x/../expected.txt /tmp/hop; ln -s /tmp/hop /app/answer.txt; ln -s /tmp /app/data",
                 "ln -s /tests /app/t; ln -s t/expected.txt /app/answer.txt; ln -s /tmp /app/data"):
        hacked = run_trial(task, command_agent(hack), "hack")
        assert (hacked.error, hacked.rewards) == (None, {"reward": 0.0}), (hack, hacked.logs)


@pytest.mark.parametrize("workdir", ["/usr/src/app", "/var/www/html", "/etc/app", "/library/app"])
def test_an_answer_link_is_removed_wherever_the_workdir_is(needs_sandbox, tmp_path, workdir):
    """The links checked are the ones the sandbox wrote (its upper dir, listed by the host), not a search that
    skips the userland: a workdir under ``/usr``, ``/var``, ``/etc`` or a folder named ``lib...`` once kept an
    answer linked to ``/tests/expected.txt`` (a search that pruned those paths paid it 1)."""
    d = tmp_path / "wd"
    make_task(tmp_path, "wd", f"cmp -s {workdir}/answer.txt /tests/expected.txt {REWARD}",
              f"echo 'the answer' > {workdir}/answer.txt", dockerfile=f"FROM ubuntu:24.04\nWORKDIR {workdir}\n")
    (d / "tests" / "expected.txt").write_text("the answer\n")
    task = load_task(d)
    assert run_trial(task, AGENTS["oracle"], "oracle").reward == 1.0
    hacked = run_trial(task, command_agent("ln -s /tests/expected.txt answer.txt"), "hack")
    assert (hacked.error, hacked.rewards) == (None, {"reward": 0.0}), hacked.logs


def test_a_link_through_a_per_process_path_is_removed(needs_sandbox, tmp_path):
    """``/proc/self/cwd`` (``/proc/N/...``, ``/dev/fd``) leads where the reading process is: resolved by the
    clean-up from ``/`` it names an innocent path, read by ``test.sh`` after ``cd /tests`` it is the expected
    file. A link whose own target names ``/proc``, ``/sys`` or ``/dev`` is removed, directly or mid-chain."""
    d = tmp_path / "proc"
    make_task(tmp_path, "proc", f"cd /tests && cmp -s /app/answer.txt expected.txt {REWARD}",
              "echo 'the answer' > /app/answer.txt")
    (d / "tests" / "expected.txt").write_text("the answer\n")
    task = load_task(d)
    assert run_trial(task, AGENTS["oracle"], "oracle").reward == 1.0
    for hack in ("ln -s /proc/self/cwd/expected.txt /app/answer.txt",
                 "ln -s /proc/self/cwd /tmp/here; ln -s /tmp/here/expected.txt /app/answer.txt",
                 "ln -s ../proc/self/cwd/expected.txt /app/answer.txt",
                 "ln -s /proc/3/cwd/expected.txt /app/answer.txt"):
        hacked = run_trial(task, command_agent(hack), "hack")
        assert (hacked.error, hacked.rewards) == (None, {"reward": 0.0}), (hack, hacked.logs)


def test_what_the_image_put_in_the_userland_the_agent_cannot_change(needs_sandbox, tmp_path):
    """A checker the Dockerfile COPYs into ``/usr/local/lib/.../dist-packages`` stays the host's (readable, not
    writable by the sandbox's root); a file it COPYs into the workdir is the agent's to edit. Once both were the
    sandbox's, and an agent that rewrote the checker to ``return True`` was paid 1 for a wrong answer."""
    site = "/usr/local/lib/python3.11/dist-packages"
    d = tmp_path / "image"
    make_task(tmp_path, "image", "python3 -c 'import sys; sys.path.insert(0, \"" + site + "\"); import checker; "
              "sys.exit(0 if checker.check(\"/app/answer.txt\") else 1)' " + REWARD,
              "echo secret > /app/answer.txt; echo edited >> /app/notes.txt",
              dockerfile=f"FROM python:3.11\nWORKDIR /app\nCOPY checker.py {site}/checker.py\nCOPY notes.txt /app/\n")
    (d / "environment" / "checker.py").write_text("def check(path):\n    return open(path).read().strip() == 'secret'\n")
    (d / "environment" / "notes.txt").write_text("notes\n")
    task = load_task(d)
    assert run_trial(task, AGENTS["oracle"], "oracle").reward == 1.0  # the agent edits the workdir's file
    hack = (f"printf 'def check(path):\\n    return True\\n' > {site}/checker.py; "
            f"rm -f {site}/checker.py; mv /app/notes.txt {site}/checker.py; echo wrong > /app/answer.txt")
    hacked = run_trial(task, command_agent(hack), "hack")
    assert (hacked.error, hacked.rewards) == (None, {"reward": 0.0}), hacked.logs
    assert "Permission denied" in hacked.logs["agent"], hacked.logs
