"""Every CLI command's help carries an example, every documented command group exists, and every command the
source names (in messages and docstrings) is a real one."""
import argparse
import re
from pathlib import Path

import trajkit.cli.traces
from trajkit.cli.main import build_parser

SOURCE = Path(__file__).resolve().parents[1] / "trajkit"


def _leaves(parser: argparse.ArgumentParser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs or (path and parser.get_default("handler")):  # a command that also has subcommands (demo)
        yield path, parser
    if not subs:
        return
    for name, child in subs[0].choices.items():
        yield from _leaves(child, path + (name,))


def test_every_command_has_an_example():
    leaves = list(_leaves(build_parser()))
    names = {" ".join(p) for p, _ in leaves}
    assert {"traces stats", "traces report", "traces filter", "traces export", "traces synth", "demo",
            "demo agent", "bench traces"} <= names
    missing = [" ".join(p) for p, parser in leaves
               if "example" not in ((parser.epilog or "") + (parser.description or "")).lower()]
    assert missing == []


def _unknown_command(parser: argparse.ArgumentParser, words: list[str]) -> str | None:
    """The first of ``words`` that should name a subcommand and does not (None when all exist)."""
    for word in words:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or not re.fullmatch(r"[a-z][a-z0-9_-]*", word):
            return None  # a leaf command's arguments, or a placeholder such as NAME or CONFIG
        if word not in subs[0].choices:
            return word
        parser = subs[0].choices[word]
    return None


def test_commands_named_in_the_source_exist():
    """`trajkit ...` in a message or docstring (an export error once named `trajkit traces tokenizer`)."""
    parser = build_parser()
    named = [(path.name, m.group(1)) for path in sorted(SOURCE.rglob("*.py"))
             for m in re.finditer(r"`+trajkit ([^`]+)`", path.read_text())]
    assert ("traces_export.py", "demo --stage traces") in named  # the export error's hint is among them
    bad = [(name, text) for name, text in named if _unknown_command(parser, text.split())]
    assert bad == []
    assert _unknown_command(parser, "traces tokenizer --out DIR".split()) == "tokenizer"


def test_traces_group_docstring_lists_its_commands():
    listed = re.search(r"``trajkit traces …``: ([a-z, -]+)\.", trajkit.cli.traces.__doc__).group(1).split(", ")
    registered = [p[1] for p, _ in _leaves(build_parser()) if p[0] == "traces"]
    assert sorted(listed) == sorted(registered) == ["export", "filter", "report", "stats", "synth", "template-info"]
