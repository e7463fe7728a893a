"""Which launcher the namespace sandbox runs (:mod:`trajkit.envs.sandbox.launch`'s steps), and building the compiled one.

The compiled ``launch.c`` is built once per source version with the host's C compiler into
``$TRAJKIT_CACHE/sandbox`` (it runs as root, so it is used only from a folder and a file no one else can write);
``python -I -S launch.py`` is the same steps where no compiler is found or the build fails (an ``exec`` then
costs a Python start more, ~30 ms here).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from trajkit.envs.sandbox.base import SandboxError

LAUNCHER = Path(__file__).with_name("launch.py")
LAUNCHER_C = Path(__file__).with_name("launch.c")
_LAUNCHER: list[str] | None = None
_LAUNCHER_LOCK = threading.Lock()


def launcher(kind: str | None = None) -> list[str]:
    """The launcher's command: the compiled ``launch.c`` (built once per source version into
    ``$TRAJKIT_CACHE/sandbox``), or ``python -I -S launch.py`` where no C compiler is found or the build fails.
    ``kind`` ``"c"`` or ``"python"`` asks for one (``"c"`` raises when it cannot be built);
    ``$TRAJKIT_SANDBOX_LAUNCHER`` does the same for the default."""
    global _LAUNCHER
    kind = kind or os.environ.get("TRAJKIT_SANDBOX_LAUNCHER") or None
    python = [sys.executable, "-I", "-S", str(LAUNCHER)]
    if kind == "python":
        return python
    if kind is None and _LAUNCHER is not None:
        return _LAUNCHER
    with _LAUNCHER_LOCK:
        try:
            built = [str(_build_launcher())]
        except SandboxError:
            if kind == "c":
                raise
            built = python
        if kind is None:
            _LAUNCHER = built
        return built


def _build_launcher() -> Path:
    """The compiled launcher for this ``launch.c`` (its hash in the name), built atomically if absent. It runs
    as root, so it is used only from a folder and a file that only this user can write."""
    import hashlib

    from trajkit.recipes.cache import cache_dir

    source = LAUNCHER_C.read_bytes()
    folder = cache_dir() / "sandbox"
    binary = folder / f"launch-{hashlib.sha256(source).hexdigest()[:16]}"
    folder.mkdir(parents=True, exist_ok=True)
    for path in (folder, binary):
        if path.exists():
            st = path.lstat()
            if path.is_symlink() or st.st_uid != os.geteuid() or st.st_mode & 0o022:
                raise SandboxError(f"{path} is not owned by this user alone; not running it as root")
    if binary.exists():
        return binary
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SandboxError("no C compiler (cc) to build the sandbox launcher")
    tmp = folder / f".{binary.name}.{os.getpid()}.{threading.get_ident()}"
    done = subprocess.run([compiler, "-O2", "-Wall", "-o", str(tmp), "-x", "c", "-"], input=source,
                          capture_output=True, check=False)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise SandboxError(f"building the sandbox launcher failed: {done.stderr.decode(errors='replace')[-500:]}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, binary)
    return binary


