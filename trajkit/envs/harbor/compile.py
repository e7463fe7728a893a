"""``trajkit envs compile``: Harbor tasks from an Agent Skill (``SKILL.md``), Skill2Env-style, kept only when sound.

Four stages, each its own function, with our own prompts:

1. **plan** (:func:`plan`): the model reads the skill and lists up to ``n`` task titles, one per line;
2. **write** (:func:`write_files`): for each title the model writes ``instruction.md``, ``tests/test.sh`` and
   ``solution/solve.sh`` as ``=== PATH`` sections (:func:`parse_files`; any other path is refused); trajkit
   writes ``task.toml`` itself (schema 1.4, no network, short timeouts);
3. **static checks**: the folder loads (:func:`trajkit.envs.harbor.task.load_task`) and passes
   :func:`trajkit.envs.harbor.check.static_problems`;
4. **Oracle/NOP** (:func:`trajkit.envs.harbor.check.check_task`): the Oracle scores 1 and the NOP agent 0.

Tasks that pass go to ``OUT/<slug>``; the others to ``OUT/rejected/<slug>`` with the verdict in
``OUT/compile.json``. The model is any OpenAI-compatible endpoint (:class:`trajkit.envs.harbor.rubric.ChatModel`).
Deviation from Skill2Env: no mapping of reward keys to instruction sentences, one reward key per task.
"""
from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from trajkit.envs.harbor.check import check_task
from trajkit.envs.harbor.rubric import ChatModel
from trajkit.envs.harbor.task import TaskError, load_task
from trajkit.errors import InputError

PLANNER_SYSTEM = ("You design small, automatically checkable shell tasks that exercise an Agent Skill. Reply "
                  "with at most {n} task titles, one per line, nothing else.")
WRITER_SYSTEM = ("You write one task for a Linux sandbox (workdir /app, no network). Reply with three sections, "
                 "each a line '=== PATH' followed by the file: instruction.md (what the agent must do), "
                 "tests/test.sh (checks the result and writes 1 or 0 to /logs/verifier/reward.txt), "
                 "solution/solve.sh (a correct solution).")
FILES = ("instruction.md", "tests/test.sh", "solution/solve.sh")
TASK_TOML = """schema_version = "1.4"

[task]
name = "{name}"

[metadata]
source = "trajkit envs compile"
skill = "{skill}"
title = {title}

[agent]
timeout_sec = 120.0

[verifier]
timeout_sec = 60.0

[environment]
memory_mb = 1024
storage_mb = 256
network_mode = "none"
workdir = "/app"
"""


def plan(model: ChatModel, skill: str, n: int) -> list[str]:
    reply = model.reply([{"role": "system", "content": PLANNER_SYSTEM.format(n=n)},
                         {"role": "user", "content": skill}])
    titles = [re.sub(r"^\s*(?:[-*]|\d+[.)])\s*", "", line).strip() for line in reply.splitlines()]
    return [t for t in titles if t][:n]


def writer_messages(skill: str, title: str) -> list[dict]:
    return [{"role": "system", "content": WRITER_SYSTEM}, {"role": "user", "content": f"Skill:\n{skill}\n\nTask: {title}"}]


def parse_files(reply: str) -> dict[str, str]:
    """``=== PATH`` sections -> ``{path: text}``; each of :data:`FILES` exactly, nothing else.

    >>> parse_files("=== instruction.md\\nDo.\\n=== tests/test.sh\\necho 1\\n=== solution/solve.sh\\ntrue\\n")
    {'instruction.md': 'Do.\\n', 'tests/test.sh': 'echo 1\\n', 'solution/solve.sh': 'true\\n'}
    """
    parts = re.split(r"^=== *(\S+) *$", reply, flags=re.MULTILINE)
    files = {path: body.lstrip("\n") for path, body in zip(parts[1::2], parts[2::2])}
    extra, missing = sorted(set(files) - set(FILES)), [f for f in FILES if f not in files]
    if extra or missing:
        raise InputError(f"the model's files: missing {missing}, not allowed {extra}",
                         hint=f"sections must be exactly {list(FILES)}")
    return files


def write_files(model: ChatModel, skill: str, title: str) -> dict[str, str]:
    return parse_files(model.reply(writer_messages(skill, title)))


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:48] or "task"


@dataclass
class CompiledTask:
    title: str
    name: str
    verdict: str
    detail: str = ""
    path: str = ""


def compile_skill(skill_path: str | Path, model: ChatModel, out: str | Path, n: int = 4,
                  sandbox: str = "namespace") -> list[CompiledTask]:
    """Plan, write, check and keep (module docstring); writes ``OUT/compile.json``."""
    skill_path, out = Path(skill_path), Path(out)
    skill = skill_path.read_text(encoding="utf-8")
    skill_name = skill_path.parent.name or skill_path.stem
    out.mkdir(parents=True, exist_ok=True)
    rows = [_compile_one(model, skill, skill_name, title, out, sandbox) for title in plan(model, skill, n)]
    (out / "compile.json").write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return rows


def _compile_one(model: ChatModel, skill: str, skill_name: str, title: str, out: Path, sandbox: str) -> CompiledTask:
    name = slug(title)
    draft = out / "rejected" / name
    shutil.rmtree(draft, ignore_errors=True)
    try:
        files = write_files(model, skill, title)
    except (InputError, OSError, ValueError) as exc:
        return CompiledTask(title, name, "unusable reply", str(exc))
    for rel, text in files.items():
        (draft / rel).parent.mkdir(parents=True, exist_ok=True)
        (draft / rel).write_text(text, encoding="utf-8")
    (draft / "task.toml").write_text(TASK_TOML.format(name=name, skill=skill_name, title=json.dumps(title)))
    try:
        task = load_task(draft)
    except TaskError as exc:
        return CompiledTask(title, name, "invalid", str(exc), str(draft))
    row = check_task(task, sandbox)  # the static checks first, then the Oracle and NOP
    if not row.ok:
        return CompiledTask(title, name, row.verdict, row.detail, str(draft))
    kept = out / name
    shutil.rmtree(kept, ignore_errors=True)
    shutil.move(str(draft), kept)
    return CompiledTask(title, name, "ok", "", str(kept))
