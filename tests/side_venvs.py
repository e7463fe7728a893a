"""The side virtualenvs (Hermes Agent, vLLM, verifiers, tinker-cookbook) built while the other tests run.

Each side venv has its own pins and its own Makefile target (``make vllm-venv``, …) and lives under
``cache_dir()`` (``$TRAJKIT_CACHE`` or ``~/.cache/trajkit``). A fresh ``make test`` used to build all of them
before the first test: minutes of downloads and unpacking on an idle test runner. With
``--build-side-venvs`` (``make test`` passes it) this plugin instead:

1. after collection, finds the venvs the selected tests need (a test needs venv ``NAME`` when its fixture
   closure holds ``NAME_venv``, or when it carries ``@pytest.mark.side_venv("NAME")``: for a fixture reached
   only through ``request.getfixturevalue``), moves those tests to the end of the run, grouped by venv in
   :data:`TAIL_ORDER` (stable: the other tests and each module's own order are kept), and starts one
   ``make <target>`` per needed venv in the background, its output in ``build/side-venvs/<name>.log``
   (beside the Makefile);
2. the session fixture ``NAME_venv`` waits for that build (bounded by ``--side-venv-timeout``, counted from
   the build's start) and fails every test that needs it, naming the venv, its make target, the exit status
   and its log's last lines, when the build fails or runs past the bound. A venv never turns into a skip here;
3. the terminal summary lists each build's exit status, its seconds and how long the tests waited on it;
   builds still running when the session ends (``-x``, Ctrl-C) are stopped.

A test that runs a side venv's python requests its ``NAME_venv`` fixture (directly or through another
fixture), so that ``make test`` builds that venv and runs the test after it: adding a venv is one entry in
:data:`VENVS` and its Makefile target. A venv whose python is overridden by its environment variable (``TRAJKIT_VLLM_PYTHON`` on a GPU node) is not
built. Without ``--build-side-venvs`` the fixtures return at once and nothing is built: the tests that need a
missing venv skip naming its make target, or fail under ``TRAJKIT_REQUIRE_FIXTURES=1``, as before.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from trajkit.recipes.cache import VLLM_VENV, cache_dir

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
BUILD_TIMEOUT_S = 2400.0
"""Default bound on a build, from its start: the empty-cache builds took ~13 min in a row on a 2-core runner."""
_LOG_TAIL = 20


@dataclass(frozen=True)
class SideVenv:
    """A side venv: its Makefile target, its folder under ``cache_dir()`` and the variable that overrides its
    python (then nothing is built)."""

    target: str
    folder: str
    override_env: str | None = None


VENVS = {
    "hermes": SideVenv("hermes-venv", "hermes-agent-0.19.0"),
    "vllm": SideVenv("vllm-venv", VLLM_VENV, "TRAJKIT_VLLM_PYTHON"),
    "verifiers": SideVenv("verifiers-venv", "verifiers-0.4.0", "TRAJKIT_VERIFIERS_PYTHON"),
    "tinker-cookbook": SideVenv("tinker-cookbook-venv", "tinker-cookbook-0.5.8"),
}
"""Name -> venv; the test-facing fixture of ``NAME`` is ``NAME_venv`` (``-`` as ``_``). The folder names are
the Makefile's (tests/test_side_venvs.py checks them against it)."""
FIXTURES = {name.replace("-", "_") + "_venv": name for name in VENVS}
TAIL_ORDER = ("verifiers", "hermes", "tinker-cookbook", "vllm")
"""The moved tests run in this order of their venv: smallest build first (verifiers ~1 min, vLLM's torch and
Ray the largest), so that the first of them rarely waits."""


@dataclass
class Build:
    """One background ``make <target>``: its process (None when it was not started), log and times."""

    name: str
    log: Path
    proc: subprocess.Popen | None = None
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    watcher: threading.Thread | None = None
    waited_s: float = 0.0
    error: str | None = None


class SideVenvBuilds:
    """The session's builds: started once per venv, awaited by the fixtures."""

    def __init__(self, makefile: Path, log_dir: Path, timeout_s: float):
        self.makefile, self.log_dir, self.timeout_s = makefile, log_dir, timeout_s
        self.builds: dict[str, Build] = {}

    def start(self, name: str) -> Build:
        """Start ``make <target>`` for ``name`` unless started already (or overridden: then no process)."""
        if name in self.builds:
            return self.builds[name]
        venv = VENVS[name]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        build = Build(name, self.log_dir / f"{name}.log")
        if not (venv.override_env and os.environ.get(venv.override_env)):
            with open(build.log, "wb") as log:  # the child keeps its own copy of the descriptor
                build.proc = subprocess.Popen(["make", "-f", str(self.makefile), "-C", str(self.makefile.parent),
                                               venv.target], stdin=subprocess.DEVNULL, stdout=log,
                                              stderr=subprocess.STDOUT, start_new_session=True)
            build.watcher = threading.Thread(target=_watch, args=(build,), daemon=True)
            build.watcher.start()
        self.builds[name] = build
        return build

    def wait(self, name: str) -> None:
        """Return once ``name``'s build succeeded; ``pytest.fail`` naming it and its log when it failed, or
        when it has not ended ``timeout_s`` after its start (it is stopped then)."""
        build = self.start(name)
        if build.error is None and build.watcher is not None:
            before = time.monotonic()
            build.watcher.join(timeout=max(0.0, build.started + self.timeout_s - before))
            if build.watcher.is_alive():
                _stop(build.proc)
                build.watcher.join()
                build.error = f"did not finish within {self.timeout_s:.0f} s of its start (stopped)"
            elif build.proc.returncode != 0:
                build.error = f"failed with exit status {build.proc.returncode}"
            build.waited_s += time.monotonic() - before
            build.watcher = None  # awaited: later tests read the outcome
        if build.error is not None:
            venv = VENVS[name]
            pytest.fail(f"side venv {name!r} (`make {venv.target}`, {cache_dir() / venv.folder}) "
                        f"{build.error}; its build log is {build.log}; last lines:\n{_tail(build.log)}",
                        pytrace=False)

    def stop_all(self) -> None:
        """Stop the builds still running (the session ended before a test waited on them)."""
        for build in self.builds.values():
            if build.watcher is not None and build.watcher.is_alive():
                _stop(build.proc)
                build.watcher.join()
                build.error = "stopped unfinished at the end of the session"

    def summary(self) -> list[str]:
        """One line per build: its outcome, its seconds from start to end, the tests' wait and its log."""
        lines = []
        for build in self.builds.values():
            if build.proc is None:
                lines.append(f"{build.name}: not built (${VENVS[build.name].override_env} is set)")
                continue
            state = build.error or ("built" if build.proc.returncode == 0 else f"exit status {build.proc.returncode}")
            seconds = (build.ended or time.monotonic()) - build.started
            lines.append(f"{build.name}: {state} ({seconds:.0f} s from its start; the tests waited "
                         f"{build.waited_s:.0f} s on it); log {build.log}")
        return lines


def _watch(build: Build) -> None:
    build.proc.wait()
    build.ended = time.monotonic()


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the build's process group (make, pip and their children), SIGKILL after 10 s."""
    for sig, seconds in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:  # the group has ended
            break
        try:
            proc.wait(timeout=seconds)
            break
        except subprocess.TimeoutExpired:
            continue


def _tail(path: Path) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-_LOG_TAIL:])
    except OSError as exc:
        return f"(unreadable: {exc})"


def needed(item) -> set[str]:
    """The side venvs ``item`` needs: ``NAME_venv`` in its fixture closure, or a ``side_venv(NAME)`` mark."""
    names = {FIXTURES[f] for f in getattr(item, "fixturenames", ()) if f in FIXTURES}
    for mark in item.iter_markers("side_venv"):
        if not mark.args or mark.args[0] not in VENVS:
            raise pytest.UsageError(f"{item.nodeid}: side_venv takes one of {sorted(VENVS)}, got {mark.args}")
        names.add(mark.args[0])
    return names


def pytest_addoption(parser):
    group = parser.getgroup("side venvs")
    group.addoption("--build-side-venvs", action="store_true",
                    help="build the side venvs the selected tests need in the background (make test)")
    group.addoption("--side-venv-timeout", type=float, default=BUILD_TIMEOUT_S,
                    help=f"seconds from a build's start before its tests fail (default {BUILD_TIMEOUT_S:.0f})")
    group.addoption("--side-venvs-makefile", default=str(ROOT / "Makefile"),
                    help="the Makefile whose <name>-venv targets build them (default: the checkout's)")


def pytest_configure(config):
    config.addinivalue_line("markers", "side_venv(name): needs that side venv (one of "
                                       f"{', '.join(VENVS)}); with --build-side-venvs it runs last")
    if config.getoption("--build-side-venvs"):
        makefile = Path(config.getoption("--side-venvs-makefile")).resolve()
        config.stash[_BUILDS] = SideVenvBuilds(makefile, makefile.parent / "build" / "side-venvs",
                                               config.getoption("--side-venv-timeout"))


_BUILDS = pytest.StashKey[SideVenvBuilds]()


@pytest.hookimpl(trylast=True)  # after deselection and pytest's own fixture-scope reordering
def pytest_collection_modifyitems(config, items):
    builds = config.stash.get(_BUILDS, None)
    if builds is None:
        return
    needs = {id(item): needed(item) for item in items}
    early = [item for item in items if not needs[id(item)]]
    late = [item for item in items if needs[id(item)]]
    late.sort(key=lambda item: max(TAIL_ORDER.index(n) for n in needs[id(item)]))  # stable
    items[:] = early + late
    if config.option.collectonly:
        return
    for name in TAIL_ORDER:
        if any(name in n for n in needs.values()):
            builds.start(name)


def pytest_sessionfinish(session):
    builds = session.config.stash.get(_BUILDS, None)
    if builds is not None:
        builds.stop_all()


def pytest_terminal_summary(terminalreporter, config):
    builds = config.stash.get(_BUILDS, None)
    if builds is not None and builds.builds:
        terminalreporter.write_sep("=", "side venvs")
        for line in builds.summary():
            terminalreporter.write_line(line)


def _ready(request, name: str) -> Path:
    builds = request.config.stash.get(_BUILDS, None)
    if builds is not None:
        builds.wait(name)
    return cache_dir() / VENVS[name].folder


@pytest.fixture(scope="session")
def hermes_venv(request) -> Path:
    """The Hermes Agent's venv folder (``make hermes-venv``), once its build, if one runs, succeeded."""
    return _ready(request, "hermes")


@pytest.fixture(scope="session")
def vllm_venv(request) -> Path:
    """vLLM's venv folder (``make vllm-venv``), once its build, if one runs, succeeded."""
    return _ready(request, "vllm")


@pytest.fixture(scope="session")
def verifiers_venv(request) -> Path:
    """verifiers' venv folder (``make verifiers-venv``), once its build, if one runs, succeeded."""
    return _ready(request, "verifiers")


@pytest.fixture(scope="session")
def tinker_cookbook_venv(request) -> Path:
    """tinker-cookbook's venv folder (``make tinker-cookbook-venv``), once its build, if one runs, succeeded."""
    return _ready(request, "tinker-cookbook")
