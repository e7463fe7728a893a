"""Setup (``make verifiers-venv``), run by the verifiers venv's python; imports nothing of trajkit.

Makes verifiers' ``null`` harness installable offline: its PEP 723 script's packages are downloaded once
(``pip download``, wheels only) into ``VENV/trajkit-offline/wheels``, indexed as a local PEP 503 index
(``simple/``), and the script's environment is built once from that index with ``UV_OFFLINE=1`` into the uv
cache ``uv-cache/`` (which proves the index is complete), for the script at ``scripts/<sha256>.py``: where the
trainer's verifiers runs write it (uv keys a script's environment by its path), so they reuse this one.
``ready`` (written last) holds the script's sha256: run again, it does nothing while the script is unchanged. At run time the trainer points uv at the index and the
cache (``trajkit.envs.verifiers.process.offline_env``).

    python prewarm.py           # into sys.prefix/trajkit-offline
"""
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE


def dependencies(script: str) -> list[str]:
    """The ``dependencies`` list of a PEP 723 script's metadata block."""
    block = re.search(r"^# /// script\n((?:#.*\n)*?)# ///$", script, re.M)
    if block is None:
        raise SystemExit("verifiers' chat program has no PEP 723 block")
    toml = "".join(line[2:] + "\n" for line in block.group(1).splitlines())
    found = re.search(r"^dependencies\s*=\s*(\[.*?\])", toml, re.M | re.S)
    return json.loads(found.group(1)) if found else []


def write_index(wheels: Path, simple: Path) -> None:
    shutil.rmtree(simple, ignore_errors=True)
    for wheel in sorted(wheels.glob("*.whl")):
        name = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        (simple / name).mkdir(parents=True, exist_ok=True)
        with open(simple / name / "index.html", "a") as f:
            f.write(f'<a href="{wheel.resolve().as_uri()}">{html.escape(wheel.name)}</a><br>\n')


def main() -> None:
    out = Path(sys.prefix) / "trajkit-offline"
    digest = hashlib.sha256(CHAT_PROGRAM_SOURCE.encode()).hexdigest()
    ready = out / "ready"
    if ready.exists() and ready.read_text().strip() == digest:
        ready.touch()  # make compares its time with prewarm.py's
        print(f"{out}: up to date")
        return
    ready.unlink(missing_ok=True)
    out.mkdir(exist_ok=True)
    (out / "scripts").mkdir(exist_ok=True)
    script = out / "scripts" / f"{digest}.py"  # the path verifiers' subprocess runtime writes it to at run time
    script.write_text(CHAT_PROGRAM_SOURCE)
    wheels = out / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "-d", str(wheels),
                    *dependencies(CHAT_PROGRAM_SOURCE)], check=True)
    write_index(wheels, out / "simple")
    uv = Path(sys.executable).parent / "uv"
    env = {**os.environ, "UV_DEFAULT_INDEX": (out / "simple").as_uri(), "UV_CACHE_DIR": str(out / "uv-cache"),
           "UV_PYTHON": sys.executable, "UV_PYTHON_DOWNLOADS": "never", "UV_OFFLINE": "1"}
    subprocess.run([str(uv), "sync", "--script", str(script), "--quiet", "--no-config"], check=True, env=env)
    ready.write_text(digest + "\n")
    print(f"{out}: {len(list(wheels.glob('*.whl')))} wheels indexed; verifiers' chat program syncs offline")


if __name__ == "__main__":
    main()
