"""The verifiers driver as a child process in the verifiers venv, and the offline setup it runs under.

Why a child process: ``verifiers==0.4.0`` pins ``mcp==2.0.0`` (and ``anthropic``, ``renderers``, ...) against
trajkit's own venv (openenv-core's newer fastmcp), so it lives in its own venv (``make verifiers-venv``) and the
trainer talks to it over pipes: :mod:`trajkit.envs.verifiers.driver` (which imports nothing of trajkit) reads
JSON requests on stdin and answers on stdout. One child serves a whole run (or a whole check); it loads
each environment asked for once, and its rollouts run concurrently inside it (asyncio), each one verifiers'
``null`` harness in verifiers' ``subprocess`` runtime.

**Offline.** The ``null`` harness is a PEP 723 script that verifiers installs with ``uv sync --script`` before
each runtime's first use. ``make verifiers-venv`` downloads the script's packages once
(:mod:`trajkit.envs.verifiers.prewarm`: a local package index and a warm uv cache inside the venv,
``VENV/trajkit-offline/``); at run time the child gets ``UV_DEFAULT_INDEX`` = that local index,
``UV_CACHE_DIR`` = that cache, ``UV_PYTHON`` = the venv's python and ``UV_PYTHON_DOWNLOADS=never``, so uv
neither reaches an index nor fetches an interpreter (verifiers sets ``UV_OFFLINE=false`` for its sync, which is
why the index, not ``UV_OFFLINE``, is what keeps it local). The Hugging Face libraries run with
``HF_HUB_OFFLINE=1``. ``HOME`` is a fresh folder per child (verifiers keeps its runtimes' folders and scripts
under ``~/.cache/verifiers``), removed at close; the harness scripts go to one shared folder
(``trajkit-offline/scripts``: uv keys a script's environment by its path, so every run reuses the one environment
``make verifiers-venv`` built).
"""
from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path

from trajkit.errors import ConfigError
from trajkit.recipes.cache import cache_dir

VERIFIERS_VENV = "verifiers-0.4.0"
"""The verifiers venv's folder under :func:`~trajkit.recipes.cache.cache_dir` (``make verifiers-venv``)."""
OFFLINE = "trajkit-offline"
"""The offline uv setup's folder inside the venv (``prewarm.py`` writes it; ``ready`` is its last file)."""
DRIVER = Path(__file__).with_name("driver.py")
TASKSETS = Path(__file__).with_name("tasksets")
"""trajkit's example tasksets (``vf-sum``), on the child's ``PYTHONPATH``."""
START_TIMEOUT_S = 300.0


class DriverError(RuntimeError):
    """The verifiers driver failed (it died, or answered a request with an error); the message holds why."""


def verifiers_python() -> Path:
    """``$TRAJKIT_VERIFIERS_PYTHON`` when set, else ``cache_dir()/verifiers-0.4.0/bin/python``."""
    return Path(os.environ.get("TRAJKIT_VERIFIERS_PYTHON") or cache_dir() / VERIFIERS_VENV / "bin" / "python")


def _missing(what: str) -> ConfigError:
    return ConfigError(f"task.name=verifiers: {what}; run `make verifiers-venv` (it builds the verifiers venv and "
                       "its offline package index), or set TRAJKIT_VERIFIERS_PYTHON to such a venv's python")


def offline_env(python: Path | None = None) -> dict[str, str]:
    """The environment variables that keep the child and its harness scripts offline (module docstring)."""
    python = python or verifiers_python()
    if not python.exists():
        raise _missing(f"verifiers' venv is missing ({python})")
    venv = python.parent.parent
    offline = venv / OFFLINE
    if not (offline / "ready").exists():
        raise _missing(f"the offline package index for verifiers' harness scripts is missing ({offline})")
    return {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "UV_DEFAULT_INDEX": (offline / "simple").as_uri(), "UV_CACHE_DIR": str(offline / "uv-cache"),
            "UV_PYTHON": str(python), "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1",
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}


class Driver:
    """The driver child (module docstring): ``request(op, ...)`` sends a request and waits for its answer; many
    threads may wait at once (the gateway env runs a round's rollouts in threads). ``path``: a folder added to
    the verifiers venv's import path (tasksets that are not installed there)."""

    def __init__(self, path: str | None = None, python: Path | None = None):
        python = python or verifiers_python()
        env = {**os.environ, **offline_env(python)}
        self.home = tempfile.mkdtemp(prefix="trajkit-vf-home-")
        paths = [str(TASKSETS)] + ([str(Path(path).resolve())] if path else [])
        scripts = python.parent.parent / OFFLINE / "scripts"
        scripts.mkdir(exist_ok=True)
        env.update(HOME=self.home, TRAJKIT_VF_SCRIPTS=str(scripts),
                   PYTHONPATH=os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        self._stderr = tempfile.TemporaryFile()
        self._proc = subprocess.Popen([str(python), str(DRIVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr, env=env, text=True, bufsize=1, start_new_session=True)
        self._ids = itertools.count(1)
        self._pending: dict[int, Future] = {}
        self._lock = threading.Lock()
        self._ready: Future = Future()
        self._reader = threading.Thread(target=self._read, name="trajkit-vf-driver", daemon=True)
        self._reader.start()
        try:
            self._ready.result(timeout=START_TIMEOUT_S)
        except Exception:
            self.close()
            raise

    def stderr_tail(self, n: int = 3000) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", errors="replace")[-n:]

    def _read(self) -> None:
        for line in self._proc.stdout:
            if not line.startswith("{"):
                continue
            msg = json.loads(line)
            if msg.get("ready"):
                self._ready.set_result(msg)
                continue
            with self._lock:
                fut = self._pending.pop(msg.get("id"), None)
            if fut is not None:
                fut.set_result(msg)
        code = self._proc.wait()
        error = DriverError(f"the verifiers driver exited with code {code}; its stderr ends:\n{self.stderr_tail()}")
        with self._lock:
            waiting, self._pending = list(self._pending.values()), {}
        for fut in [self._ready, *waiting]:
            if not fut.done():
                fut.set_exception(error)

    def request(self, op: str, timeout: float | None = None, **body) -> dict:
        fut: Future = Future()
        rid = next(self._ids)
        with self._lock:
            if self._proc.poll() is not None:
                raise DriverError(f"the verifiers driver is not running (exit code {self._proc.returncode}); its "
                                  f"stderr ends:\n{self.stderr_tail()}")
            self._pending[rid] = fut
            self._proc.stdin.write(json.dumps({"id": rid, "op": op, **body}) + "\n")
            self._proc.stdin.flush()
        msg = fut.result(timeout=timeout)
        if "failed" in msg:
            env = body.get("env", {}).get("taskset")
            raise DriverError(f"verifiers driver: {op} on taskset {env!r} failed: {msg['failed']}\n"
                              f"{msg.get('traceback', '')}")
        return msg

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._proc.stdin.write(json.dumps({"op": "close"}) + "\n")
                self._proc.stdin.close()
                self._proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self._proc.pid, 9)
                self._proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> "Driver":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
