"""Every CLI command's help carries an example, and every documented command group exists."""
import argparse

from trajkit.cli.main import build_parser


def _leaves(parser: argparse.ArgumentParser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from _leaves(child, path + (name,))


def test_every_command_has_an_example():
    leaves = list(_leaves(build_parser()))
    names = {" ".join(p) for p, _ in leaves}
    assert {"traces stats", "traces report", "traces filter", "traces export", "traces synth", "demo",
            "bench traces"} <= names
    missing = [" ".join(p) for p, parser in leaves
               if "example" not in ((parser.epilog or "") + (parser.description or "")).lower()]
    assert missing == []
