"""What each CLI path imports: ``trajkit --version``, ``--help`` and the ``traces`` commands never load torch
or transformers (``trajkit --version`` once took 4.7 s for an import of torch at parser build).

Each command runs in a fresh interpreter (``sys.modules`` of this pytest process already holds torch), and
the modules loaded after it ran are read from there. The time these paths take is in ``trajkit bench cli``.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[1] / "trajkit" / "data" / "sample" / "kimi.jsonl.xz"
HEAVY = ("torch", "transformers", "peft", "tinker")  # tinker: the SDK, which only the Tinker server reads

# Runs trajkit's entry point on argv, then writes the names of the loaded modules to the file given first.
PROBE = """
import json, sys
from trajkit.cli.main import main
out, argv = sys.argv[1], sys.argv[2:]
try:
    code = main(argv)
except SystemExit as exc:
    code = exc.code
json.dump({"code": code, "modules": sorted(sys.modules)}, open(out, "w"))
"""


def loaded_after(argv: list[str], tmp_path: Path) -> tuple[int, set[str]]:
    out = tmp_path / "modules.json"
    subprocess.run([sys.executable, "-c", PROBE, str(out), *argv], check=True, cwd=tmp_path,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
    data = json.loads(out.read_text())
    return data["code"], set(data["modules"])


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


@pytest.mark.parametrize("argv", [
    ["--version"], ["--help"], ["traces", "--help"], ["traces", "stats", "--help"],
    ["traces", "report", "--help"], ["traces", "export", "--help"], ["traces", "filter", "--help"],
    ["traces", "synth", "--help"], ["traces", "template-info", "--help"],
    ["generate", "--help"], ["serve", "--help"], ["train", "--help"], ["bench", "--help"],
    ["models", "--help"], ["demo", "--help"], ["audit", "--help"], ["audit", "data", "--help"],
], ids=" ".join)
def test_help_and_version_import_neither_torch_nor_transformers(argv, tmp_path):
    code, modules = loaded_after(argv, tmp_path)
    assert code == 0 and heavy(modules) == []


def test_version_imports_no_command_module(tmp_path):
    _, modules = loaded_after(["--version"], tmp_path)
    assert sorted(m for m in modules if m.startswith("trajkit.cli.") and m != "trajkit.cli.main"
                  and m != "trajkit.cli.commands") == []


@pytest.mark.parametrize("command", [
    ["traces", "stats", str(SAMPLE), "--json"],
    ["traces", "filter", str(SAMPLE), "--min-think-words", "5", "--out", "kept.jsonl"],
    ["traces", "export", str(SAMPLE), "--format", "openai", "--out", "sft.jsonl"],
    ["traces", "synth", "--rows", "5", "--seed", "0", "--out", "synth.jsonl"],
    ["traces", "report", str(SAMPLE), "--out", "report", "--max-traces", "5"],
], ids=lambda c: " ".join(c[:2]))
def test_traces_commands_import_neither_torch_nor_transformers(command, tmp_path):
    code, modules = loaded_after(command, tmp_path)
    assert code == 0 and heavy(modules) == []
    assert "trajkit.traces" in modules  # the command did run its library code


def test_traces_stats_imports_no_numpy(tmp_path):
    """`traces stats` counts with plain Python: numpy's import (~0.1 s CPU, in every run) is paid only by plots."""
    code, modules = loaded_after(["traces", "stats", str(SAMPLE), "--json"], tmp_path)
    assert code == 0 and "trajkit.traces.stats" in modules
    assert sorted(m for m in modules if m.split(".")[0] == "numpy") == []
