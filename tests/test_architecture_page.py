"""docs/architecture.md is checked against the code: every module it names exists, its list of who may
import whom is ``tests/test_imports.py``'s pin, and each "on A, B and C" claim of its package table holds
against the import graph read from the source (the same scan)."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from tests.test_imports import BASE, LAYERS, import_graph

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "architecture.md").read_text()
ROW = re.compile(r"^\| `(trajkit\.[\w.]+)` \| (.*) \| (.*) \|$", re.M)
SHORT = {p.removeprefix("trajkit."): p for p in LAYERS}
# backticked words outside parentheses in the module cells that are not module names (a third-party package)
NOT_MODULES = {"openenv"}


def top_level(cell: str) -> str:
    """``cell`` without its parenthesised text (a module's description, where functions and values are named)."""
    out, depth = [], 0
    for ch in cell:
        depth += ch == "("
        if depth == 0:
            out.append(ch)
        depth -= ch == ")" and depth > 0
    return "".join(out)


def _exists(dotted: str) -> bool:
    """``dotted`` is a module of the package, or an attribute defined in one (``trajkit.rl.Sample``)."""
    if importlib.util.find_spec(dotted.split(":")[0]) if _parent_ok(dotted) else False:
        return True
    module, _, attr = dotted.rpartition(".")
    if not module or not _parent_ok(module) or importlib.util.find_spec(module) is None:
        return False
    return attr in _source_names(module)


def _parent_ok(dotted: str) -> bool:
    parts = dotted.split(".")
    return all(importlib.util.find_spec(".".join(parts[:i])) is not None for i in range(1, len(parts)))


def _source_names(module: str) -> str:
    spec = importlib.util.find_spec(module)
    return Path(spec.origin).read_text() if spec and spec.origin else ""


def test_every_dotted_module_path_the_page_names_exists():
    """(Outside 'Where things moved', whose left column names the old paths, gone by design.)"""
    current = re.sub(r"## Where things moved.*?(?=\n## )", "", PAGE, flags=re.S)
    names = set(re.findall(r"`(trajkit(?:\.\w+)+)", current))
    assert len(names) >= 25
    assert sorted(n for n in names if not _exists(n)) == []


def test_every_module_the_package_table_lists_exists():
    missing = []
    for package, modules, _ in ROW.findall(PAGE):
        folder = ROOT / package.replace(".", "/")
        for name in re.findall(r"`([a-z_0-9]+(?:\.c|\.py|/)?)`", top_level(modules)):
            stem = name.removesuffix("/").removesuffix(".py")
            if stem in NOT_MODULES or stem in SHORT:  # a package named in a layer claim
                continue
            if not any(p.exists() for p in (folder / f"{stem}.py", folder / stem, folder / name)):
                missing.append(f"{package}: {name}")
    assert missing == []


def _layer_list() -> dict[str, set[str]]:
    out = {}
    for package, allowed in re.findall(r"^- `(trajkit\.\w+)`: (.+)$", PAGE, re.M):
        out[package] = set() if allowed.strip() == "nothing" else {SHORT[a.strip()] for a in allowed.split(",")}
    return out


def test_the_pages_layer_list_is_the_import_tests_pin():
    assert _layer_list() == {p: set(a) for p, a in LAYERS.items()}


def _package_edges() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        package = ".".join(module.split(".")[:2])
        for t in targets:
            other = ".".join(t.split(".")[:2])
            if other != package and t not in BASE and other not in BASE:
                out.setdefault(package, set()).add(other)
    return out


def test_each_on_claim_of_the_package_table_holds_against_the_import_graph():
    """"on A, B and C" (a cell's claim of what the package imports): it imports nothing else of trajkit."""
    edges, checked = _package_edges(), 0
    for package, modules, notes in ROW.findall(PAGE):
        if package not in LAYERS:
            continue
        for claim in re.findall(r"\b[Oo]n ((?:`?[a-z]+`?(?: \(`?[\w. ]+`?\))?(?:, | and |,? and | only)?)+)",
                                modules + " " + notes):
            if "below" in claim:
                continue
            words = set(re.findall(r"[a-z]+", re.sub(r"\([^)]*\)", "", claim)))
            claimed = {SHORT[w] for w in words if w in SHORT}
            if not claimed:
                continue
            checked += 1
            assert edges.get(package, set()) <= claimed, (package, claim, sorted(edges.get(package, set()) - claimed))
    assert checked >= 5
