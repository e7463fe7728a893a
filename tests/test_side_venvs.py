"""The side-venv builds of ``make test`` (:mod:`tests.side_venvs`), run in an inner pytest over a fake Makefile
whose "builds" are shell loops: the other tests start while a build runs, the tests that need it run last and
wait for it, a failed or overlong build fails its tests naming the venv and its log, and nothing is built
without ``--build-side-venvs``. The registry's folders are checked against the real Makefile's."""
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.side_venvs import ROOT, VENVS

# A build that waits (at most ~30 s) for the file the first plain test writes: it cannot end before a test ran.
WAIT_FOR_GO = "@i=0; while [ ! -f {go} ]; do i=$$((i+1)); [ $$i -lt 300 ] || exit 9; sleep 0.1; done; touch {done}"

INNER_TESTS = '''
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def note(what):
    with open(HERE / "order", "a") as f:
        f.write(what + "\\n")


def test_needs_verifiers(verifiers_venv):  # first in the file, run after the plain test
    note("verifiers")
    assert (HERE / "done").exists(), "ran before its venv's build ended"
    assert verifiers_venv == Path(HERE / "cache" / "verifiers-0.4.0")


def test_plain():
    note("plain")
    assert not (HERE / "done").exists(), "the build ended before any test ran"
    (HERE / "go").touch()


def test_needs_hermes(hermes_venv):
    note("hermes")


@pytest.mark.side_venv("hermes")
def test_reaches_hermes_at_run_time(request):
    note("hermes-marked")
    request.getfixturevalue("hermes_venv")
'''


def _inner(tmp_path: Path, recipes: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """Run :data:`INNER_TESTS` in ``tmp_path`` with :mod:`tests.side_venvs` over a Makefile of ``recipes``."""
    rules = "".join(f"{target}:\n\t{recipe}\n" for target, recipe in recipes.items())
    (tmp_path / "Makefile").write_text(rules.format(go=tmp_path / "go", done=tmp_path / "done"))
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRAJKIT_CACHE": str(tmp_path / "cache")}
    for key in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTEST_ADDOPTS"):
        env.pop(key, None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.side_venvs", "-p", "no:cacheprovider",
                           "-q", "-rA", "--side-venvs-makefile", str(tmp_path / "Makefile"), *args, "test_inner.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_plain_tests_run_while_a_venv_builds_and_its_tests_wait_for_it(tmp_path):
    proc = _inner(tmp_path, {"verifiers-venv": WAIT_FOR_GO, "hermes-venv": "@echo no index reachable; exit 3"},
                  "--build-side-venvs")
    out = proc.stdout
    assert (tmp_path / "order").read_text().split() == ["plain", "verifiers", "hermes-marked"], out
    assert "1 failed, 2 passed, 1 error" in out, out
    # the failed build names the venv, its target, its exit status and its log, with the log's lines
    log = tmp_path / "build" / "side-venvs" / "hermes.log"
    assert "ERROR at setup of test_needs_hermes" in out, out
    assert (f"side venv 'hermes' (`make hermes-venv`, {tmp_path / 'cache' / 'hermes-agent-0.19.0'}) failed with "
            f"exit status 2; its build log is {log}") in out, out  # 2: make's status when a recipe fails
    assert "no index reachable" in log.read_text() and "no index reachable" in out, out
    assert "FAILED test_inner.py::test_reaches_hermes_at_run_time" in out, out
    assert "verifiers: built (" in out and "hermes: failed with exit status 2 (" in out, out


def test_a_build_past_its_bound_is_stopped_and_fails_its_tests(tmp_path):
    start = time.monotonic()
    proc = _inner(tmp_path, {"verifiers-venv": "@sleep 30", "hermes-venv": "@true"},
                  "--build-side-venvs", "--side-venv-timeout", "1", "-k", "verifiers or plain")
    assert time.monotonic() - start < 25, proc.stdout  # the 30 s build was stopped, not waited for
    assert "did not finish within 1 s of its start (stopped)" in proc.stdout, proc.stdout
    assert "1 passed, 2 deselected, 1 error" in proc.stdout, proc.stdout
    assert "hermes" not in proc.stdout.split("side venvs")[-1]  # no selected test needs it: not built


def test_a_session_that_stops_early_stops_its_builds(tmp_path):
    start = time.monotonic()
    proc = _inner(tmp_path, {"verifiers-venv": "@exit 1", "hermes-venv": "@sleep 30"},
                  "--build-side-venvs", "-x", "-k", "verifiers or hermes")
    assert time.monotonic() - start < 25, proc.stdout  # -x after the verifiers test's error
    assert "1 error" in proc.stdout and "hermes: stopped unfinished at the end of the session" in proc.stdout, \
        proc.stdout


def test_without_the_option_nothing_is_built_or_awaited(tmp_path):
    proc = _inner(tmp_path, {"verifiers-venv": "@touch {done}", "hermes-venv": "@touch {done}"},
                  "-k", "hermes")
    assert "2 passed" in proc.stdout and not (tmp_path / "done").exists(), proc.stdout
    assert "side venvs" not in proc.stdout


def _make_var(name: str, cache: Path) -> str:
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), "--eval", f"print-var: ; @echo $({name})", "print-var"],
                          env={**os.environ, "TRAJKIT_CACHE": str(cache)}, capture_output=True, text=True,
                          timeout=30, check=True)
    return proc.stdout.strip()


@pytest.mark.parametrize("name,variable", [("hermes", "HERMES_VENV"), ("vllm", "VLLM_VENV"),
                                           ("verifiers", "VERIFIERS_VENV"), ("tinker-cookbook", "COOKBOOK_VENV")])
def test_each_side_venv_is_the_makefiles_target_and_folder(name, variable, tmp_path):
    assert _make_var(variable, tmp_path) == str(tmp_path / VENVS[name].folder)
    assert f"\n{VENVS[name].target}:" in (ROOT / "Makefile").read_text()
