"""The Harbor task loader and the Dockerfile reader, against hand-written task folders and the shipped ones."""
import os
import stat
import textwrap
import time

import pytest

from tests.envs.harbor.conftest import BROKEN, SHIPPED
from trajkit.envs.harbor.dockerfile import DockerfileError, parse_dockerfile
from trajkit.envs.harbor.task import TaskError, load_task, load_tasks, task_folders
from trajkit.envs.harbor.trial import sandbox_spec
from trajkit.envs.sandbox.beneath import remove_at


def write_task(root, name="t", toml="", instruction="Do it.", test="echo 1 > /logs/verifier/reward.txt"):
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "task.toml").write_text(textwrap.dedent(toml))
    (d / "instruction.md").write_text(instruction)
    (d / "tests" / "test.sh").write_text(test)
    return d


def test_a_harbor_task_reads_into_typed_sections_with_unknown_keys_kept(tmp_path):
    d = write_task(tmp_path, toml="""
        version = "1.0"
        shiny = true
        [metadata]
        author_name = "A"
        difficulty = "easy"
        [task]
        name = "my/task"
        [agent]
        timeout_sec = 120
        later = "x"
        [verifier]
        env = { API_KEY = "k", N = 3 }
        [environment]
        cpus = 2
        memory = "4G"
        storage = "512M"
        allow_internet = true
        workdir = "/srv/app"
        future_key = [1, 2]
        """)
    t = load_task(d)
    assert (t.name, t.instruction, t.version) == ("my/task", "Do it.", "1.0")
    assert (t.agent.timeout_sec, t.verifier.timeout_sec, t.solution.timeout_sec) == (120.0, 600.0, 600.0)
    assert t.verifier.env == {"API_KEY": "k", "N": "3"}
    env = t.environment
    assert (env.cpus, env.memory_mb, env.storage_mb, env.network, env.workdir) == (2.0, 4096, 512, True, "/srv/app")
    assert t.metadata == {"author_name": "A", "difficulty": "easy", "name": "my/task"}
    assert sorted(t.unknown_keys) == ["agent.later", "environment.future_key", "shiny"]
    assert t.agent.extra == {"later": "x"} and env.extra == {"future_key": [1, 2]} and t.extra == {"shiny": True}
    assert t.solution_dir is None and t.dockerfile is None


def test_network_is_off_unless_the_task_asks(tmp_path):
    assert not load_task(write_task(tmp_path, "a")).environment.network
    assert not load_task(write_task(tmp_path, "b", '[environment]\nnetwork_mode = "none"\n')).environment.network
    assert load_task(write_task(tmp_path, "c", '[environment]\nnetwork_mode = "bridge"\n')).environment.network


@pytest.mark.parametrize("toml, message", [
    ("[agent]\ntimeout_sec = 'soon'\n", "task.toml: field agent.timeout_sec: must be float, got 'soon'"),
    ("[verifier]\ntimeout_sec = 0\n", "task.toml: field verifier.timeout_sec: must be > 0, got 0"),
    ("[environment]\nmemory = 'lots'\n", "task.toml: field environment.memory: must be a size such as '4G'"),
    ("[environment]\nworkdir = 'app'\n", "task.toml: field environment.workdir: must be an absolute path"),
    ("agent = 3\n", "task.toml: field agent: must be a table"),
    ("[agent\n", "task.toml: not valid TOML"),
])
def test_a_bad_task_is_reported_by_file_and_field(tmp_path, toml, message):
    d = write_task(tmp_path, toml=toml)
    with pytest.raises(TaskError) as info:
        load_task(d)
    assert str(info.value).startswith(f"{d / 'task.toml'}: ") and message in str(info.value)


def test_missing_files_are_named(tmp_path):
    d = write_task(tmp_path)
    (d / "tests" / "test.sh").unlink()
    with pytest.raises(TaskError, match="missing tests/test.sh"):
        load_task(d)


def test_a_folder_of_tasks_is_lenient_per_task_unless_strict(tmp_path):
    write_task(tmp_path, "good")
    write_task(tmp_path, "bad", "[agent]\ntimeout_sec = -1\n")
    (tmp_path / "not-a-task").mkdir()
    report = load_tasks(tmp_path)
    assert [t.name for t in report.tasks] == ["good"]
    assert len(report.errors) == 1 and "bad/task.toml: field agent.timeout_sec" in str(report.errors[0])
    with pytest.raises(TaskError, match="bad/task.toml"):
        load_tasks(tmp_path, strict=True)
    assert task_folders(tmp_path / "good") == [tmp_path / "good"]
    with pytest.raises(TaskError, match="no task.toml here"):
        task_folders(tmp_path / "not-a-task")


def test_the_shipped_tasks_load_and_the_broken_ones_fail_only_where_meant():
    shipped = load_tasks(SHIPPED)
    assert shipped.errors == [] and len(shipped.tasks) >= 8
    assert all(t.solution_dir is not None and t.unknown_keys == [] for t in shipped.tasks)
    broken = load_tasks(BROKEN)
    assert [e.path.split("/")[-2] for e in broken.errors] == ["bad-toml"]


def test_the_dockerfile_reader_honours_workdir_env_copy_and_names_what_it_cannot():
    text = ("# comment\nFROM python:3.11-slim AS base\nARG V=2\nWORKDIR /app\nENV A=1 B=\"x y\"\n"
            "ENV C $A-$V\nCOPY a.txt b.txt ./data/\nCOPY --chown=1:1 dir /opt/dir\nCMD [\"bash\"]\n")
    plan = parse_dockerfile(text)
    assert plan.base == "python:3.11-slim" and plan.workdir == "/app"
    assert plan.env == {"A": "1", "B": "x y", "C": "1-2"}
    assert plan.steps == [("mkdir", [], "/app"), ("copy", ["a.txt", "b.txt"], "/app/data/"),
                          ("copy", ["dir"], "/opt/dir")]
    with pytest.raises(DockerfileError, match=r"^Dockerfile:3: RUN: not allowed"):
        parse_dockerfile("FROM x\nWORKDIR /a\nRUN apt-get update && \\\n  apt-get install -y jq\n")
    assert parse_dockerfile("RUN pip install \\\n  numpy\n", allow_run=True).steps == [("run", "pip install numpy", None)]
    with pytest.raises(DockerfileError, match=r"^D:1: COPY: --from"):
        parse_dockerfile("COPY --from=build /x /y\n", "D")
    with pytest.raises(DockerfileError, match=r"^D:2: FROBNICATE: unknown"):
        parse_dockerfile("FROM x\nFROBNICATE now\n", "D")


def test_a_task_without_a_dockerfile_gets_its_environment_files_in_the_workdir():
    by_name = {t.name: t for t in load_tasks(SHIPPED).tasks}
    plain = sandbox_spec(by_name["rename-ext"])
    assert plain.workdir == "/app" and plain.steps == [("copy", ["notes"], "/app/notes")]
    docker = sandbox_spec(by_name["env-config"])
    assert docker.env == {"APP_MODE": "staging"} and docker.steps == [("mkdir", [], "/app")]


# -- what a task folder may hold, and input that once crashed or hung the loader ------------------------------

def _fifo(d):
    os.mkfifo(d / "environment" / "pipe")


def _device(d):
    os.mknod(d / "tests" / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # the host's /dev/null


def _absolute_link(d):
    (d / "environment" / "abs").symlink_to(d / "environment" / "data.txt")  # inside the task, but absolute


def _escaping_link(d):
    (d / "environment" / "up").symlink_to("../tests/test.sh")  # inside the task, outside environment/


def _deep_toml(d):
    (d / "task.toml").write_text("x = " + "[" * 3000 + "]" * 3000 + "\n")


def _deep_tests(d):
    deep = d / "tests"
    for _ in range(1500):
        deep = deep / "d"
        os.mkdir(deep)


def _sparse_instruction(d):
    with open(d / "instruction.md", "r+b") as f:
        f.truncate(2 << 30)  # 2 GB of holes: nothing is written to disk


@pytest.mark.parametrize("spoil, message", [
    (_fifo, "environment/pipe is a FIFO"), (_device, "tests/null is a character device"),
    (_absolute_link, "environment/abs is an absolute symbolic link"),
    (_escaping_link, "environment/up is a symbolic link to ../tests/test.sh, which leaves environment/"),
    (_deep_toml, "task.toml: not valid TOML: nested too deep"),
    (_deep_tests, "tests/ holds more than 10000 entries or is more than 64 levels deep"),
    (_sparse_instruction, "instruction.md: is larger than 1048576 bytes"),
])
def test_a_task_folder_with_what_no_task_may_hold_is_one_invalid_row(tmp_path, spoil, message):
    write_task(tmp_path, "good")
    bad = write_task(tmp_path, "bad")
    (bad / "environment").mkdir()
    (bad / "environment" / "data.txt").write_text("data\n")
    spoil(bad)
    try:
        t0 = time.monotonic()
        report = load_tasks(tmp_path)
        assert time.monotonic() - t0 < 10
        assert [t.name for t in report.tasks] == ["good"] and len(report.errors) == 1
        assert report.errors[0].task_dir == bad and message in str(report.errors[0])
        with pytest.raises(TaskError):
            load_tasks(tmp_path, strict=True)
    finally:  # pytest's own clean-up of old temp folders recurses: leave it nothing deep
        fd = os.open(bad, os.O_RDONLY | os.O_DIRECTORY)
        remove_at(fd, "tests")
        os.close(fd)


def test_a_link_that_stays_inside_its_part_once_copied_is_fine(tmp_path):
    d = write_task(tmp_path)
    (d / "environment" / "sub").mkdir(parents=True)
    (d / "environment" / "data.txt").write_text("data\n")
    (d / "environment" / "sub" / "same").symlink_to("../data.txt")
    (d / "tests" / "alias.sh").symlink_to("test.sh")
    assert load_task(d).name == "t"


@pytest.mark.parametrize("value", ["inf", "nan", "1e12", "86401"])
def test_a_time_limit_must_be_finite_and_at_most_a_day(tmp_path, value):
    for section in ("agent", "verifier", "solution"):
        d = write_task(tmp_path, f"t-{section}", toml=f"[{section}]\ntimeout_sec = {value}\n")
        with pytest.raises(TaskError, match=f"field {section}.timeout_sec: must be"):
            load_task(d)
    d = write_task(tmp_path, "t-build", toml=f"[environment]\nbuild_timeout_sec = {value}\n")
    with pytest.raises(TaskError, match="field environment.build_timeout_sec: must be"):
        load_task(d)
    assert load_task(write_task(tmp_path, "day", toml="[agent]\ntimeout_sec = 86400\n")).agent.timeout_sec == 86400


def test_an_unclosed_quote_in_the_dockerfile_names_its_file_and_line():
    with pytest.raises(DockerfileError, match=r"^D:2: ENV: No closing quotation"):
        parse_dockerfile("FROM x\nENV A=\"open\n", "D")
    with pytest.raises(DockerfileError, match=r"^D:1: COPY: No closing quotation"):
        parse_dockerfile("COPY 'a /app/\n", "D")


def test_a_time_limit_must_be_at_least_a_millisecond(tmp_path):
    # 5e-324 > 0, but times a timeout_multiplier of 0.5 it is 0.0: no limit the sandbox accepts, an infra
    # failure (masked) instead of the agent's timeout (the task's minimum)
    for section in ("agent", "verifier", "solution"):
        d = write_task(tmp_path, f"t-{section}", toml=f"[{section}]\ntimeout_sec = 5e-324\n")
        with pytest.raises(TaskError, match=f"field {section}.timeout_sec: must be at least 0.001"):
            load_task(d)


def test_a_scaled_agent_limit_stays_positive_and_finite():
    from pathlib import Path

    from trajkit.envs.harbor.task import HarborTask, Phase, Environment, scale_agent_timeouts
    from trajkit.errors import ConfigError

    def task(limit):
        return HarborTask(Path("t"), "t", "Do it.", Phase(limit), Phase(30.0), Phase(), Environment())

    with pytest.raises(ConfigError, match="timeout_multiplier"):
        scale_agent_timeouts([task(0.001)], 1e-322)
    with pytest.raises(ConfigError, match="timeout_multiplier"):
        scale_agent_timeouts([task(86400.0)], 1e305)


def test_a_task_toml_cannot_set_the_hosts_task_options(tmp_path):
    from trajkit.config import from_dict
    from trajkit.envs.registry import TaskConfig, make_task
    from trajkit.models.tokenizer import byte_tokenizer

    spoil = ('max_turns = 99\nsandbox = "none"\ntimeout_multiplier = 1e9\nharbor = { sandbox = "none" }\n'
             '[task]\nname = "t"\nmax_turns = 99\nsandbox = "none"\njudge_url = "http://evil/v1"\n'
             '[agent]\ntimeout_multiplier = 1e9\nmax_turns = 99\n[environment]\nsandbox = "none"\n')
    d = write_task(tmp_path, "t", toml=spoil)
    cfg = from_dict(TaskConfig, {"name": "harbor", "path": str(d), "harbor": {"timeout_multiplier": 2.0}}, "task")
    task = make_task(cfg, 0, byte_tokenizer())
    seen = (task.max_turns, task.sandbox, task.judge, task.tasks["t"].agent.timeout_sec)
    assert seen == (3, "namespace", None, 1200.0)


@pytest.mark.parametrize("toml, field", [
    ("[environment]\ncpus = 1" + "0" * 400 + "\n", "environment.cpus"),  # a TOML integer past any float
    ("[environment]\nmemory_mb = 1" + "0" * 400 + "\n", "environment.memory_mb"),
    ("[environment]\nmemory = \"1" + "0" * 400 + "G\"\n", "environment.memory"),  # float() is inf, int() fails
    ("[environment]\nstorage = \"1" + "0" * 400 + "\"\n", "environment.storage"),
    ("[verifier]\nreward_range = [0, 1" + "0" * 400 + "]\n", "verifier.reward_range"),  # math.isfinite overflows
    ("[agent]\ntimeout_sec = 1" + "0" * 5000 + "\n", None),  # tomllib's ValueError: over 4300 digits
])
def test_a_number_too_large_for_a_float_is_one_task_error_not_an_overflow(tmp_path, toml, field):
    d = write_task(tmp_path, toml=toml)
    with pytest.raises(TaskError, match=f"field {field}: must be" if field else "not valid TOML"):
        load_task(d)


def test_a_scaled_agent_limit_stays_within_what_a_sandbox_can_wait():
    # 86400 * 1e6 is finite, but past ~9.2e9 s subprocess.run(capture_output=True, timeout=...) raises
    # OverflowError at the first exec; 0.001 * 1e-300 is > 0, yet below the 1 ms a task.toml may give
    import subprocess
    from pathlib import Path

    from trajkit.envs.harbor.task import HarborTask, Phase, Environment, scale_agent_timeouts
    from trajkit.errors import ConfigError

    with pytest.raises(OverflowError):
        subprocess.run(["true"], capture_output=True, timeout=86400.0 * 1e6, check=False)  # as docker.exec

    def task(limit):
        return HarborTask(Path("t"), "t", "Do it.", Phase(limit), Phase(30.0), Phase(), Environment())

    for limit, multiplier in ((86400.0, 1e6), (0.001, 1e-300)):
        with pytest.raises(ConfigError, match="timeout_multiplier"):
            scale_agent_timeouts([task(limit)], multiplier)
    assert scale_agent_timeouts([task(86400.0)], 100.0)[0].agent.timeout_sec == 8640000.0


@pytest.mark.parametrize("toml", ["[environment]\nmemory_mb = 1125899906842624\n",  # 2**50: finite, yet
                                  "[environment]\nmemory = \"9999999999T\"\n"])  # << 20 is past a signed 64 bits
def test_a_memory_limit_must_fit_the_sandboxs_address_space_limit(tmp_path, toml):
    # memory_mb << 20 is RLIMIT_AS in bytes (strtol in the launcher: ERANGE, every exec an exit 125)
    with pytest.raises(TaskError, match="field environment.memory_mb: must be at most"):
        load_task(write_task(tmp_path, toml=toml))
    most = (2 ** 63 - 1) >> 20
    d = write_task(tmp_path, "most", toml=f"[environment]\nmemory_mb = {most}\n")
    assert load_task(d).environment.memory_mb == most


@pytest.mark.parametrize("value", ["true", '"60"', "-0.0", "{ a = 1 }", "[60]", "0"])
def test_a_time_limit_that_is_no_positive_number_is_refused(tmp_path, value):
    # TOML's booleans are no number here (True > 0), nor strings, tables, arrays; -0.0 and 0 are no limit
    d = write_task(tmp_path, toml=f"[agent]\ntimeout_sec = {value}\n")
    with pytest.raises(TaskError, match="field agent.timeout_sec: must be"):
        load_task(d)


@pytest.mark.parametrize("toml, field", [
    ('[task]\nname = "a\\u0000b"\n', "task.name"),
    ('[agent]\nuser = "root\\u0000x"\n', "agent.user"),
    ('[environment]\ndocker_image = "img\\u0000"\n', "environment.docker_image"),
    ('[environment]\nnetwork_mode = "none\\u0000"\n', "environment.network_mode"),
])
def test_a_nul_in_a_task_string_is_one_task_error(tmp_path, toml, field):
    d = write_task(tmp_path, toml=toml)
    with pytest.raises(TaskError, match=f"field {field}: must not contain a NUL"):
        load_task(d)


@pytest.mark.parametrize("toml, field", [("[environment]\ncpus = 1e300\n", "environment.cpus"),
                                         ("[environment]\ngpus = 4097\n", "environment.gpus")])
def test_a_device_count_past_any_host_is_refused_at_load(tmp_path, toml, field):
    d = write_task(tmp_path, toml=toml)
    with pytest.raises(TaskError, match=f"field {field}: must be at most 4096"):
        load_task(d)
    ok = write_task(tmp_path / "ok", toml="[environment]\ncpus = 4096\ngpus = 8\n")
    assert (load_task(ok).environment.cpus, load_task(ok).environment.gpus) == (4096.0, 8)
