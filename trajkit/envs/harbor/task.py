"""Harbor task folders -> typed :class:`HarborTask` objects.

A Harbor task is a folder (the layout of Harbor's ``harbor tasks init``)::

    my-task/
      instruction.md        what the agent is told
      task.toml             [task] [metadata] [agent] [verifier] [solution] [environment]
      environment/          a Dockerfile (or plain files copied into the workdir)
      tests/test.sh         writes /logs/verifier/reward.json (a dict of numbers) or reward.txt (one float)
      solution/solve.sh     optional: the Oracle's solution

:func:`load_task` reads one folder, :func:`load_tasks` a task folder or a folder of task folders. Keys of
``task.toml`` this loader does not know are kept (``HarborTask.extra``, ``Section.extra``) and reported
(``HarborTask.unknown_keys``), as Harbor ignores them. A bad task raises :class:`TaskError` naming the file and
the field; :func:`load_tasks` collects those per task (lenient) unless ``strict``, when the first one stops it.

Before anything is read, :func:`~trajkit.envs.harbor.folder.check_folder` checks what the folder holds (files,
folders and links that stay inside their part once copied; no FIFO, device, absolute or escaping link, no tree
deeper than 64 or larger than 10,000 entries). Text files are read as UTF-8, at most 1 MiB each, only when
regular files; TOML at most 32 levels deep; paths (``workdir``) are normalised inside ``/``, environment
variables and paths may hold no NUL, and limits must be positive, finite, and time limits at most 24 h.

Harbor's deprecated spellings are read: ``allow_internet`` (-> ``network_mode``), ``memory``/``storage`` such
as ``"4G"`` (-> ``memory_mb``/``storage_mb``). Deviation: Harbor's network default is on; here a task gets the
network only when it asks (``network_mode`` other than ``"none"``, or ``allow_internet = true``).

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp()) / "hello"
>>> (d / "tests").mkdir(parents=True)
>>> _ = (d / "instruction.md").write_text("Write hi to /app/out.txt")
>>> _ = (d / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt")
>>> _ = (d / "task.toml").write_text('[verifier]\\ntimeout_sec = 30\\n[environment]\\nmemory = "1G"\\nfoo = 1\\n')
>>> t = load_task(d)
>>> (t.name, t.verifier.timeout_sec, t.agent.timeout_sec, t.environment.memory_mb, t.unknown_keys)
('hello', 30.0, 600.0, 1024, ['environment.foo'])
"""
from __future__ import annotations

import math
import re
import sys
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from trajkit.envs.harbor.folder import (MIN_TIMEOUT_S, TaskError, check_depth, check_folder, check_limit,
                                        read_bounded)
from trajkit.envs.sandbox.base import bad_variable, inside_root
from trajkit.errors import ConfigError

DEFAULT_TIMEOUT_S = 600.0  # Harbor's default for [agent] and [verifier] timeout_sec
NETWORK_OFF = ("none", "no", "off", "disabled")
MAX_SCALED_TIMEOUT_S = 365 * 24 * 3600.0  # a year: past ~9.2e9 s subprocess.run(timeout=...) raises OverflowError


@dataclass
class Phase:
    """``[agent]``, ``[verifier]`` or ``[solution]``: a time limit and extra environment variables."""

    timeout_sec: float = DEFAULT_TIMEOUT_S
    env: dict[str, str] = field(default_factory=dict)
    user: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    reward_range: tuple[float, float] = (0.0, 1.0)  # [verifier] reward_range: every reward value's bounds


@dataclass
class Environment:
    """``[environment]``: resources, network, working directory and a prebuilt image name (not pulled here)."""

    cpus: float = 1.0
    memory_mb: int = 2048
    storage_mb: int = 10240
    network_mode: str = "none"
    workdir: str | None = None  # None: the Dockerfile's WORKDIR, else /app
    build_timeout_sec: float = 600.0
    docker_image: str | None = None
    gpus: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def network(self) -> bool:
        return self.network_mode.lower() not in NETWORK_OFF


@dataclass
class HarborTask:
    """One task folder, read (see the module docstring)."""

    path: Path
    name: str
    instruction: str
    agent: Phase
    verifier: Phase
    solution: Phase
    environment: Environment
    metadata: dict[str, Any] = field(default_factory=dict)
    version: str = "1.0"
    extra: dict[str, Any] = field(default_factory=dict)
    unknown_keys: list[str] = field(default_factory=list)

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def solution_dir(self) -> Path | None:
        d = self.path / "solution"
        return d if (d / "solve.sh").is_file() else None

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def dockerfile(self) -> Path | None:
        f = self.environment_dir / "Dockerfile"
        return f if f.is_file() else None


PHASE_KEYS = {"timeout_sec": float, "env": dict, "user": str}
ENV_KEYS = {"cpus": float, "memory_mb": int, "storage_mb": int, "network_mode": str, "workdir": str,
            "build_timeout_sec": float, "docker_image": str, "gpus": int}
MAX_MB = (2 ** 63 - 1) >> 20  # memory_mb << 20 is the sandbox's RLIMIT_AS in bytes, a signed 64-bit number
MAX_DEVICES = 4096  # cpus / gpus: past any host; docker --cpus=1e300 fails at the trial's start, not at load
POSITIVE = ("timeout_sec", "cpus", "memory_mb", "storage_mb", "build_timeout_sec")  # 0 would mean "no limit"
TOP_KEYS = ("version", "schema_version", "metadata", "task", "agent", "verifier", "solution", "environment",
            "source")


def scale_agent_timeouts(tasks: list[HarborTask], multiplier: float) -> list[HarborTask]:
    """``tasks`` with every ``[agent] timeout_sec`` times ``multiplier`` (Harbor's ``--timeout-multiplier``): a
    slow or shared CPU must not turn a model's answers into agent timeouts. The verifier's limit is unchanged.

    >>> t = HarborTask(Path("t"), "t", "Do it.", Phase(60.0), Phase(30.0), Phase(), Environment())
    >>> [x.agent.timeout_sec for x in scale_agent_timeouts([t], 4.0)], t.agent.timeout_sec
    ([240.0], 60.0)
    >>> scale_agent_timeouts([t], 4.0)[0].verifier.timeout_sec
    30.0
    """
    if multiplier == 1.0:
        return list(tasks)
    scaled = [replace(t, agent=replace(t.agent, timeout_sec=t.agent.timeout_sec * multiplier)) for t in tasks]
    for old, new in zip(tasks, scaled):  # 86400 * 1e305 is inf (no limit), 1e-3 * 1e-322 is 0.0 (none at all);
        # 86400 * 1e6 is finite but overflows subprocess's timeout, 1e-3 * 1e-300 is below a task's 1 ms
        if not MIN_TIMEOUT_S <= new.agent.timeout_sec <= MAX_SCALED_TIMEOUT_S:
            raise ConfigError(f"timeout_multiplier={multiplier!r} turns task {old.name}'s [agent] timeout_sec = "
                              f"{old.agent.timeout_sec:g} s into {new.agent.timeout_sec!r} s: give a multiplier that "
                              f"keeps it within [{MIN_TIMEOUT_S:g}, {MAX_SCALED_TIMEOUT_S:g}] s (1 ms to a year)")
    return scaled


def load_task(path: str | Path) -> HarborTask:
    """The task in folder ``path`` (raises :class:`TaskError` naming the file and field)."""
    path = Path(path)
    toml_path, instruction = path / "task.toml", path / "instruction.md"
    for required in (toml_path, instruction, path / "tests" / "test.sh"):
        if not required.is_file():
            raise TaskError(f"missing {required.relative_to(path)}", path=str(path),
                            hint="a Harbor task has instruction.md, task.toml and tests/test.sh")
    check_folder(path)
    try:
        data = tomllib.loads(read_text(toml_path))
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"not valid TOML: {exc}", path=str(toml_path)) from None
    except RecursionError:
        raise TaskError("not valid TOML: nested too deep", path=str(toml_path)) from None
    except ValueError as exc:  # an integer of more than 4,300 digits (int()'s limit), not a TOMLDecodeError
        raise TaskError(f"not valid TOML: {exc}", path=str(toml_path)) from None
    check_depth(data, toml_path)
    text = read_text(instruction)
    if not text.strip():
        raise TaskError("the instruction is empty", path=str(instruction))
    if (path / "environment" / "Dockerfile").is_file():
        read_text(path / "environment" / "Dockerfile")
    unknown = [k for k in data if k not in TOP_KEYS]
    task_section = _table(data, "task", toml_path)
    sections = {}
    for name in ("agent", "verifier", "solution"):
        sections[name], extra = _read(_table(data, name, toml_path), PHASE_KEYS, name, toml_path)
        bounds = extra.pop("reward_range", None) if name == "verifier" else None
        sections[name] = Phase(**sections[name], extra=extra, **_reward_range(bounds, toml_path))
        unknown += [f"{name}.{k}" for k in extra]
    env_table = _normalize_environment(_table(data, "environment", toml_path), toml_path)
    env_values, env_extra = _read(env_table, ENV_KEYS, "environment", toml_path)
    unknown += [f"environment.{k}" for k in env_extra]
    environment = Environment(**env_values, extra=env_extra)
    if environment.workdir is not None:
        environment.workdir = sandbox_path(environment.workdir, str(toml_path), "environment.workdir")
    name = str(task_section.get("name") or path.name)
    if "\0" in name:  # the name is in trial folders' names and reports
        raise TaskError(f"must not contain a NUL character, got {name!r}", path=str(toml_path), field="task.name")
    return HarborTask(path=path, name=name, instruction=text,
                      environment=environment, metadata={**_table(data, "metadata", toml_path), **task_section},
                      version=str(data.get("schema_version", data.get("version", "1.0"))),
                      extra={k: data[k] for k in data if k not in TOP_KEYS}, unknown_keys=unknown, **sections)


def read_text(path: Path) -> str:
    """A task file as text (at most ``folder.MAX_TEXT_BYTES``, a regular file); bytes that are not UTF-8 are a
    :class:`TaskError` naming the file and offset."""
    data = read_bounded(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 4]!r})", path=str(path),
                        hint="save the file as UTF-8") from None


def sandbox_path(value: str, where: str, name: str) -> str:
    """An absolute path inside the sandbox, normalised (``/../../tmp/x`` is ``/tmp/x``, as in a container:
    ``..`` never leaves ``/``); a relative path or a NUL is a :class:`TaskError` naming ``name``.

    >>> sandbox_path("/../../../tmp/x/./y/", "task.toml", "environment.workdir")
    '/tmp/x/y'
    """
    if "\0" in value or not value.startswith("/"):
        raise TaskError(f"must be an absolute path without NUL, got {value!r}", path=where, field=name)
    return inside_root(value)


def check_env(values: dict[str, str], where: str, name: str) -> dict[str, str]:
    """Environment variables a process can be given: a name without ``=`` or NUL, a value without NUL."""
    key = bad_variable(values)
    if key is not None:
        raise TaskError(f"variable {key!r}: a name needs no '=' or NUL and a value no NUL", path=where, field=name)
    return values


def _table(data: dict, name: str, where: Path) -> dict:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise TaskError(f"must be a table ([{name}]), got {type(value).__name__}", path=str(where), field=name)
    return value


def _reward_range(bounds, where: Path) -> dict:
    """``{"reward_range": (low, high)}`` from ``[verifier] reward_range = [low, high]`` (finite, low < high)."""
    if bounds is None:
        return {}
    if not (isinstance(bounds, list) and len(bounds) == 2 and all(type(b) in (int, float) for b in bounds)
            and all(abs(b) <= sys.float_info.max for b in bounds) and bounds[0] < bounds[1]):
        raise TaskError(f"must be [low, high] with finite low < high, got {bounds!r}", path=str(where),
                        field="verifier.reward_range")
    return {"reward_range": (float(bounds[0]), float(bounds[1]))}


def _read(table: dict, keys: dict[str, type], section: str, where: Path) -> tuple[dict, dict]:
    """(known values, converted to their types; unknown keys as they are)."""
    values, extra = {}, {}
    for key, value in table.items():
        kind = keys.get(key)
        if kind is None:
            extra[key] = value
            continue
        ok = (isinstance(value, kind) or (kind is float and isinstance(value, int))) and not isinstance(value, bool)
        if not ok:
            raise TaskError(f"must be {kind.__name__}, got {value!r}", path=str(where), field=f"{section}.{key}")
        if key in POSITIVE and not value > 0 or key == "gpus" and value < 0:
            raise TaskError(f"must be {'>= 0' if key == 'gpus' else '> 0'}, got {value!r}", path=str(where),
                            field=f"{section}.{key}")
        if kind in (int, float):
            check_limit(key, value, where, f"{section}.{key}")
        if key in ("cpus", "gpus") and value > MAX_DEVICES:
            raise TaskError(f"must be at most {MAX_DEVICES}, got {value!r}", path=str(where), field=f"{section}.{key}")
        if kind is str and key != "workdir" and "\0" in value:  # (workdir: sandbox_path) a NUL ends a C string
            raise TaskError(f"must not contain a NUL character, got {value!r}", path=str(where),
                            field=f"{section}.{key}")
        if key in ("memory_mb", "storage_mb") and value > MAX_MB:
            raise TaskError(f"must be at most {MAX_MB} MB (in bytes, a signed 64-bit limit), got {value!r}",
                            path=str(where), field=f"{section}.{key}")
        if kind is dict:
            value = check_env({str(k): str(v) for k, v in value.items()}, str(where), f"{section}.{key}")
        values[key] = value if kind is dict else kind(value)
    return values, extra


def _normalize_environment(table: dict, where: Path) -> dict:
    """Harbor's deprecated spellings -> the 1.4 keys (``allow_internet``, ``memory``/``storage`` strings)."""
    table = dict(table)
    if "allow_internet" in table:
        allow = table.pop("allow_internet")
        if not isinstance(allow, bool):
            raise TaskError(f"must be true or false, got {allow!r}", path=str(where), field="environment.allow_internet")
        table.setdefault("network_mode", "bridge" if allow else "none")
    for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
        if old in table:
            table.setdefault(new, _megabytes(table.pop(old), f"environment.{old}", where))
    return table


def _megabytes(value: Any, name: str, where: Path) -> int:
    """``"4G"`` -> 4096, ``"512M"`` -> 512, an int as megabytes."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", str(value), re.IGNORECASE)
    if not m:
        raise TaskError(f"must be a size such as '4G' or '512M', got {value!r}", path=str(where), field=name)
    scale = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 ** 2}[m.group(2).upper()]
    size = float(m.group(1)) * scale
    if not math.isfinite(size):  # 400 digits are inf as a float
        raise TaskError(f"must be a size such as '4G' or '512M', got {value!r}", path=str(where), field=name)
    return max(1, int(size))


@dataclass
class LoadReport:
    """What :func:`load_tasks` found: the tasks it read and the errors of those it could not."""

    tasks: list[HarborTask]
    errors: list[TaskError]


def task_folders(root: str | Path) -> list[Path]:
    """``root`` itself when it is a task (holds task.toml), else its sub-folders that hold one, sorted."""
    root = Path(root)
    if not root.is_dir():
        raise TaskError("not a folder", path=str(root), hint="give a Harbor task folder or a folder of them")
    if (root / "task.toml").is_file():
        return [root]
    found = sorted(p for p in root.iterdir() if p.is_dir() and (p / "task.toml").is_file())
    if not found:
        raise TaskError("no task.toml here or in any sub-folder", path=str(root))
    return found


def load_tasks(root: str | Path, strict: bool = False) -> LoadReport:
    """Every task under ``root`` (:func:`task_folders`); a bad one is reported and skipped, or raised when
    ``strict``."""
    tasks, errors = [], []
    for folder in task_folders(root):
        try:
            tasks.append(load_task(folder))
        except (TaskError, OSError) as exc:  # an unreadable folder is one task's error too
            error = exc if isinstance(exc, TaskError) else TaskError(f"cannot be read: {exc}", path=str(folder))
            error.task_dir = folder
            if strict:
                raise error from None
            errors.append(error)
    return LoadReport(tasks, errors)
