"""A generated Harbor task before it is a folder: :class:`TaskSpec` (instruction, input files, the Oracle's
command, the checks its verifier makes) and :func:`write_task`, which writes it as an ordinary Harbor task
folder (``instruction.md``, ``task.toml``, ``environment/``, ``tests/test.sh``, ``solution/solve.sh``).

The verifier is one Python program (``tests/test.sh`` runs it with the system ``python3``) whose expected
values are literals written at generation time: it never recomputes an answer from files the agent can edit
(``envs check --adversarial``'s ``truncate-inputs`` probe), never trusts that an output merely exists
(``empty-outputs``), and runs any program the agent wrote as ``nobody`` with a time limit (``trojan-outputs``).

Check kinds (:class:`Check`):

=========  ====================================================================================
``line``   the file's text with trailing newlines removed equals ``want`` (``echo``/``printf`` alike)
``number`` the file's text, stripped, equals ``want`` (a count written as ``3`` or ``3\\n``)
``json``   the file parses as JSON equal to ``want`` with the same types (``4.0``, ``4e0``, ``true`` are not
           ``4``) and no key twice
``absent`` the path does not exist (a renamed file's old name)
``regular`` the path is a regular file of its own: not a symbolic link, one hard link (a copy, not a link)
``run``    ``want`` is ``[[args, expected stdout], ...]``: the program at ``path``, executable, run as
           ``nobody`` with each args list, prints the expected text (trailing newlines removed)
=========  ====================================================================================
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

CheckKind = Literal["line", "number", "json", "absent", "regular", "run"]


@dataclass(frozen=True)
class Check:
    """One thing the verifier checks; ``path`` is absolute inside the sandbox (``/app/...``)."""

    kind: CheckKind
    path: str
    want: Any = None


@dataclass
class TaskSpec:
    """One task instance of a family.

    >>> spec = TaskSpec("write-file", {"file": "motd.txt", "text": "Hi"}, "Write `Hi` to `/app/motd.txt`.",
    ...                 {}, "printf '%s\\\\n' 'Hi' > /app/motd.txt", [Check("line", "/app/motd.txt", "Hi")])
    >>> spec.key
    '{"file": "motd.txt", "text": "Hi"}'
    """

    family: str
    params: dict
    instruction: str
    files: dict[str, str]  # environment/ files: relative path (inside /app) -> text
    solution: str  # the Oracle's shell command, run with sh -c in /app
    checks: list[Check]
    env: dict[str, str] = field(default_factory=dict)  # ENV lines of the task's Dockerfile
    wording: int = 0  # which instruction template was used
    heldout_kind: str | None = None  # a composed kind's held-out class (generate.py), in [metadata] when set

    @property
    def key(self) -> str:
        """The parameters as canonical JSON: what makes two instances of a split distinct (the split itself is
        decided by the solution, :func:`trajkit.envs.harbor.families.split_of`)."""
        return json.dumps(self.params, sort_keys=True)


VERIFIER = r'''import json, os, stat, subprocess

CHECKS = json.loads(%r)
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def text(path):
    with open(path, "rb") as fh:  # bytes: no universal newlines, so "\r" is no line end
        got = fh.read().decode("utf-8")
    if "\r" in got:
        raise ValueError("carriage return")
    return got


def unique(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


def same(got, want):
    if type(got) is not type(want):  # 4.0, 4e0 and true are not 4
        return False
    if isinstance(want, list):
        return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    if isinstance(want, dict):
        return got.keys() == want.keys() and all(same(got[k], want[k]) for k in want)
    return got == want


def passes(kind, path, want):
    if kind == "absent":
        return not os.path.lexists(path)
    if kind == "regular":
        st = os.lstat(path)
        return stat.S_ISREG(st.st_mode) and st.st_nlink == 1
    if kind == "run":
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return False
        for args, out in want:
            done = subprocess.run(NOBODY + [path] + args, capture_output=True, timeout=10, cwd="/tmp")
            if done.stdout.decode("utf-8", "replace").rstrip("\n") != out:
                return False
        return True
    got = text(path)
    if kind == "line":
        return got.rstrip("\n") == want
    if kind == "number":
        return got.strip() == want
    return same(json.loads(got, object_pairs_hook=unique), want)


ok = True
for kind, path, want in CHECKS:
    try:
        ok = ok and passes(kind, path, want)
    except Exception:
        ok = False
with open("/logs/verifier/reward.txt", "w") as fh:
    fh.write("1" if ok else "0")
'''


def verifier_script(checks: list[Check]) -> str:
    """``tests/test.sh``: the checks as a JSON literal inside one Python program (module docstring)."""
    payload = json.dumps([[c.kind, c.path, c.want] for c in checks])
    return "#!/bin/bash\n# generated by trajkit envs generate: expected values are literals\npython3 - <<'EOF'\n" + \
        VERIFIER % payload + "EOF\n"


def task_toml(name: str, spec: TaskSpec, split: str) -> str:
    return (f'schema_version = "1.4"\n\n[task]\nname = "{name}"\n\n[metadata]\nfamily = "{spec.family}"\n'
            f'split = "{split}"\nwording = {spec.wording}\n'
            + (f'heldout_kind = "{spec.heldout_kind}"\n' if spec.heldout_kind else "")
            + f'params = {json.dumps(spec.key)}\n'
            'tags = ["trajkit", "generated"]\n\n[agent]\ntimeout_sec = 60.0\n\n[verifier]\ntimeout_sec = 30.0\n\n'
            '[environment]\ncpus = 1\nmemory_mb = 1024\nstorage_mb = 64\nnetwork_mode = "none"\n')


def write_task(spec: TaskSpec, name: str, split: str, out: Path) -> Path:
    """``spec`` as the Harbor task folder ``out/name``; returns the folder."""
    folder = out / name
    env = folder / "environment"
    env.mkdir(parents=True)
    (folder / "instruction.md").write_text(spec.instruction.rstrip("\n") + "\n", encoding="utf-8")
    (folder / "task.toml").write_text(task_toml(name, spec, split), encoding="utf-8")
    for rel, content in spec.files.items():
        (env / rel).parent.mkdir(parents=True, exist_ok=True)
        (env / rel).write_text(content, encoding="utf-8")
    if spec.env:
        lines = ["FROM ubuntu:24.04", "WORKDIR /app"] + [f"ENV {k}={v}" for k, v in spec.env.items()]
        (env / "Dockerfile").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "tests").mkdir()
    (folder / "tests" / "test.sh").write_text(verifier_script(spec.checks), encoding="utf-8")
    (folder / "solution").mkdir()
    (folder / "solution" / "solve.sh").write_text(f"#!/bin/bash\nset -e\n{spec.solution}\n", encoding="utf-8")
    return folder
