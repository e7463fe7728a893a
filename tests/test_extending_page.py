"""docs/extending.md lists the registries: each entry point it names exists at its import path and is a
registry (a non-empty mapping or tuple of names), and every module-level registry the package defines under
one of the registry names below is on the page."""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "extending.md"
ENTRY = re.compile(r"^\| [^|]+ \| `([\w.]+):([A-Z_]+)` \|", re.M)
# names the package gives its registries; a module-level assignment of one of them is an extension point
REGISTRY_NAMES = {"BACKENDS", "DRAFT_KINDS", "TASKS", "NEEDS", "OPTIONS", "LOSSES", "OPTIMIZERS", "REPORTERS", "FORMATS",
                  "PREDICATES", "CHARTS", "THINK_POLICIES", "FAMILIES", "AGENTS", "PROBES", "PREPARE",
                  "DISTRIBUTIONS", "UPDATES", "BENCHMARKS", "COMMANDS", "STAGES", "GUARDED", "SUFFIXES", "TRAINERS"}
NOT_EXTENSION_POINTS = {"trajkit.synth.text:TASKS",  # the synthetic generator's scenario data
                        "trajkit.rl.stages:STAGES",  # the trainer's stage names, constants (docs/architecture.md)
                        "trajkit.envs.harbor.verifier:GUARDED",  # the verifier's protected paths
                        "trajkit.rl.trl_config:REPORTERS",  # TRL's report_to values that map onto log.report_to
                        # the composed generator's Oracle shell snippet per primitive: a primitive is grammar
                        # (compose_grammar: its step function, its place in a kind), not an entry (docs/envs.md)
                        "trajkit.envs.harbor.families.compose_data:STAGES"}


def entries() -> list[tuple[str, str]]:
    return ENTRY.findall(PAGE.read_text())


def test_every_registry_the_page_names_exists_at_its_import_path():
    found = entries()
    assert len(found) >= 20
    for module, name in found:
        registry = getattr(importlib.import_module(module), name)
        assert isinstance(registry, (dict, tuple)) and len(registry) > 0, (module, name)


def _defined() -> set[str]:
    out = set()
    for path in sorted((ROOT / "trajkit").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign) else []
            out.update(f"{module}:{t.id}" for t in targets if isinstance(t, ast.Name) and t.id in REGISTRY_NAMES)
    return out


def test_every_registry_of_the_package_is_on_the_page():
    listed = {f"{m}:{n}" for m, n in entries()}
    assert sorted(_defined() - listed - NOT_EXTENSION_POINTS) == []
