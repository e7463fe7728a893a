"""The verifier's phase of a trial: what ``tests/test.sh`` runs with, made so that nothing the agent left outside
its outputs changes what the verifier's tools do.

After the agent's phase (every process of the agent's is dead: each ``exec`` ends with its namespace), the host
makes ``/logs/verifier``, ``/tests`` and :data:`VERIFIER_ROOT` afresh (:meth:`Sandbox.reset_dir`: whatever the
agent left there, a symlink in their place included, is gone) and uploads ``tests/``. Then one command, as the
sandbox's root, in the workdir:

1. makes the verifier's home, temporary folder and XDG folders under :data:`VERIFIER_ROOT` (the agent never
   saw them), and moves the dot-entries the agent left in ``/root`` to :data:`AGENT_HOME`: ``/root`` is the
   password entry's home, which some tools read whatever ``$HOME`` says (``sqlite3`` reads ``~/.sqliterc``
   from ``getpwuid``, ``curl`` falls back to it, ``ssh`` uses nothing else). So a ``.sqliterc``, ``.curlrc``,
   ``.jq``, ``.gitconfig``, ``.bashrc`` the agent wrote is read by no tool of the verifier's, and a task whose
   output is such a file reads it, on purpose, from :data:`AGENT_HOME`;
2. removes every symbolic link the agent left whose real path (``realpath -m`` from ``/``, inside the sandbox)
   lies in ``/tests``, ``/logs/verifier`` or :data:`VERIFIER_ROOT`, or whose own target (joined to its folder,
   normalised without following links) names those or ``/proc``, ``/sys``, ``/dev`` (a ``/proc/self/cwd`` link
   leads where the reading process stands, so where it leads at the clean-up is not where it leads for
   ``test.sh``). The links checked are the ones the sandbox wrote (:meth:`Sandbox.written_links`: the host
   lists its upper dir, wherever the workdir is), not a search of the tree. An answer file that is a link to
   the expected file ``/tests`` brings is gone; a link the agent was asked to make that points elsewhere stays;
3. runs ``bash /tests/test.sh`` under ``env -i`` with an environment built from an allowlist
   (:func:`verifier_env`): the system ``PATH``, the fresh ``HOME``/``TMPDIR``/``XDG_*``, the image's
   ``LANG``/``LC_*``/``TERM``/``TZ`` when they name no file, Python's isolation switches, and then the
   task's explicit ``[verifier] env``. Nothing else of the image's ``ENV`` reaches the verifier
   (``PYTHONPYCACHEPREFIX``, ``LD_*``, ``GIT_*``, ``APP_MODE``, ...): a variable a check needs belongs in
   ``[verifier] env``.

The command that does steps 1-2 gets the image's variables blanked (the sandbox adds its ``SandboxSpec.env`` to
every command), so a loader variable of the image does not reach ``find`` or ``rm`` either.
"""
from __future__ import annotations

import os
import re
import shlex
import tempfile
from pathlib import Path

from trajkit.envs.harbor.task import HarborTask
from trajkit.envs.sandbox.base import SYSTEM_PATH, ExecResult, Sandbox

VERIFIER_ROOT = "/verifier"  # made by the host after the agent's phase; the verifier's HOME and TMPDIR are in it
HOME = f"{VERIFIER_ROOT}/home"
TMPDIR = f"{VERIFIER_ROOT}/tmp"
XDG = {"XDG_CONFIG_HOME": f"{HOME}/.config", "XDG_CACHE_HOME": f"{HOME}/.cache",
       "XDG_DATA_HOME": f"{HOME}/.local/share", "XDG_STATE_HOME": f"{HOME}/.local/state"}
AGENT_HOME = f"{VERIFIER_ROOT}/agent-home"  # the dot-entries the agent left in /root, moved out of the tools' way
# Python reads no user site-packages, puts no script folder or working directory on sys.path, writes no bytecode
PYTHON_ISOLATION = {"PYTHONNOUSERSITE": "1", "PYTHONSAFEPATH": "1", "PYTHONDONTWRITEBYTECODE": "1"}
FROM_IMAGE = re.compile(r"LANG|LANGUAGE|LC_[A-Z]+|TERM|TZ")  # the image's variables a verifier may keep
SAFE_VALUE = re.compile(r"[A-Za-z0-9_.,:+@=-]*")  # no '/': a locale named by a path is read from that path
SAFE_TZ = re.compile(r"(?!.*\.\.)[A-Za-z0-9_+-][A-Za-z0-9_+/.,:<>-]*")  # a zone name, not ':file', '/file' or '..'
# Where the agent's links may not lead: the verifier's own folders, which the agent never saw
GUARDED = ("/tests", "/logs/verifier", VERIFIER_ROOT)
# ... nor, named in the link itself, the kernel's folders: /proc/self/cwd, /proc/N/root, /dev/fd resolve per
# process, so where such a link leads when the clean-up looks is not where it leads when test.sh reads it
PER_PROCESS = ("/proc", "/sys", "/dev")
LINKS_FILE = f"{VERIFIER_ROOT}/links"  # the links the agent wrote (Sandbox.written_links), NUL-separated
# For each listed link, from /: R its real path (realpath -m: what it reaches now), S its own target joined to
# its folder and normalised without following links (realpath -m -s: what the link itself names). A link whose
# R or S lies in GUARDED, or whose S lies in PER_PROCESS, is removed. Batched (one realpath per list); when a
# batch resolved fewer than all (a loop, a name too long) each link is resolved alone, and one that does not
# resolve is removed: the clean-up fails closed.
_GUARD = "|".join(f"{g}|{g}/*" for g in GUARDED)
_NAMED = "|".join(f"{g}|{g}/*" for g in (*GUARDED, *PER_PROCESS))
_CASE = f'case $r in {_GUARD}) rm -f -- "$l"; continue;; esac; case $s in {_NAMED}) rm -f -- "$l";; esac'
_JOIN = 'case $t in /*) j=$t;; *) j=${l%/*}/$t;; esac'
UNLINK = (f"cd / || exit 1; [ -s {LINKS_FILE} ] || exit 0; mapfile -d '' L < {LINKS_FILE}; "
          f"xargs -0 -r realpath -m -z -- < {LINKS_FILE} > {VERIFIER_ROOT}/real 2>/dev/null; "
          f"xargs -0 -r readlink -z -- < {LINKS_FILE} > {VERIFIER_ROOT}/target 2>/dev/null; "
          f"mapfile -d '' R < {VERIFIER_ROOT}/real; mapfile -d '' T < {VERIFIER_ROOT}/target; "
          f"if [ ${{#R[@]}} -eq ${{#L[@]}} ] && [ ${{#T[@]}} -eq ${{#L[@]}} ]; then "
          f"for i in \"${{!L[@]}}\"; do l=${{L[i]}} t=${{T[i]}}; {_JOIN}; printf '%s\\0' \"$j\"; done "
          f"> {VERIFIER_ROOT}/joined; xargs -0 -r realpath -m -s -z -- < {VERIFIER_ROOT}/joined "
          f"> {VERIFIER_ROOT}/lexical 2>/dev/null; mapfile -d '' S < {VERIFIER_ROOT}/lexical; fi; "
          f"rm -f {LINKS_FILE} {VERIFIER_ROOT}/real {VERIFIER_ROOT}/target {VERIFIER_ROOT}/joined "
          f"{VERIFIER_ROOT}/lexical; "
          f"if [ ${{#S[@]}} -eq ${{#L[@]}} ]; then for i in \"${{!L[@]}}\"; do l=${{L[i]}} r=${{R[i]}} s=${{S[i]}}; "
          f"{_CASE}; done; else for l in \"${{L[@]}}\"; do r=$(realpath -m -- \"$l\" 2>/dev/null) && "
          f"t=$(readlink -- \"$l\") && {_JOIN} && s=$(realpath -m -s -- \"$j\" 2>/dev/null) || "
          f"{{ rm -f -- \"$l\"; continue; }}; {_CASE}; done; fi")
MOVE_DOTFILES = f"find /root -mindepth 1 -maxdepth 1 -name '.*' -exec mv -t {AGENT_HOME} -- {{}} +"


def verifier_env(task: HarborTask, image_env: dict[str, str]) -> dict[str, str]:
    """The verifier's whole environment (module docstring, step 3), ``[verifier] env`` last.

    >>> from pathlib import Path
    >>> from trajkit.envs.harbor.task import Environment, HarborTask, Phase
    >>> t = HarborTask(Path("t"), "t", "Do it.", Phase(), Phase(env={"ANSWER": "42"}), Phase(), Environment())
    >>> image = {"LC_ALL": "C", "LANG": "/app/evil", "PYTHONPYCACHEPREFIX": "/app/c", "TZ": "Europe/Paris"}
    >>> env = verifier_env(t, image)
    >>> env["HOME"], env["TMPDIR"], env["LC_ALL"], env["TZ"], env["ANSWER"], env["LANG"], "PYTHONPYCACHEPREFIX" in env
    ('/verifier/home', '/verifier/tmp', 'C', 'Europe/Paris', '42', 'C.UTF-8', False)
    >>> "TZ" in verifier_env(t, {"TZ": "../../app/zone"}), "TZ" in verifier_env(t, {"TZ": ":/app/zone"})
    (False, False)
    """
    kept = {k: v for k, v in image_env.items()
            if FROM_IMAGE.fullmatch(k) and (SAFE_TZ if k == "TZ" else SAFE_VALUE).fullmatch(v)}
    return {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "TERM": "dumb", **kept, "HOME": HOME, "TMPDIR": TMPDIR,
            **XDG, **PYTHON_ISOLATION, **task.verifier.env}


def verifier_command(env: dict[str, str]) -> str:
    """The one command of the verifier's phase (module docstring, steps 1-3)."""
    folders = " ".join(shlex.quote(p) for p in (HOME, *XDG.values()))
    assignments = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    prepare = f"mkdir -p -m 755 {folders} {AGENT_HOME}; mkdir -m 1777 {TMPDIR}; ( {UNLINK} ); {MOVE_DOTFILES}"
    return (f"/bin/bash -c {shlex.quote(prepare)} </dev/null >/dev/null 2>&1; "
            f"exec /usr/bin/env -i {assignments} bash /tests/test.sh")


def run_verifier(task: HarborTask, box: Sandbox, image_env: dict[str, str]) -> ExecResult:
    """Make the verifier's folders afresh, upload ``tests/`` and the list of the links the agent wrote, and run
    ``test.sh`` (module docstring)."""
    links = [p for p in box.written_links() if not any(p == g or p.startswith(g + "/") for g in GUARDED)]
    for path in ("/logs/verifier", "/tests", VERIFIER_ROOT):
        box.reset_dir(path)
    box.upload(task.tests_dir, "/tests")
    if links:
        with tempfile.TemporaryDirectory() as tmp:
            listed = Path(tmp) / "links"
            listed.write_bytes(b"".join(os.fsencode(p) + b"\0" for p in links))
            box.upload(listed, LINKS_FILE)
    blanked = {k: "" for k in image_env}  # the sandbox adds the image's ENV to every command: not to this one
    return box.exec(verifier_command(verifier_env(task, image_env)), timeout_s=task.verifier.timeout_sec,
                    env={**blanked, "PATH": SYSTEM_PATH, "HOME": HOME})
