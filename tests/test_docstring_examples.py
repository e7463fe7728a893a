"""The ``>>>`` examples in trajkit's docstrings run and print what they say (doctest, ELLIPSIS on)."""
from __future__ import annotations

import doctest
import importlib
import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

import trajkit

ROOT = Path(trajkit.__file__).parent
MODULES = sorted("trajkit." + ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                 for p in ROOT.rglob("*.py") if ">>> " in p.read_text(encoding="utf-8"))


def test_examples_were_found():
    assert "trajkit.optim.row_adam" in MODULES and "trajkit.rl.config" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    out = io.StringIO()
    with redirect_stdout(out):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name}: '>>> ' found in the source but no example was collected"
    assert result.failed == 0, out.getvalue()
