"""A minimal Dockerfile reader for the daemon-less sandbox.

The sandbox's image is the host's own ``/usr``, ``/bin``, ``/lib`` and ``/etc`` (copy-on-write), so ``FROM`` is
read and not pulled. Honoured: ``WORKDIR`` (the last one is the working directory, created), ``ENV`` (both
``ENV K=V ...`` and ``ENV K V``), ``COPY``/``ADD`` of files from the build context (``environment/``; no URLs,
no ``--from``), ``RUN`` only when the caller allows it (run in the sandbox, in order, as a build step).
Ignored as metadata: ``FROM``, ``LABEL``, ``ARG`` (its default only), ``EXPOSE``, ``CMD``, ``ENTRYPOINT``,
``USER``, ``SHELL``, ``VOLUME``, ``HEALTHCHECK``, ``STOPSIGNAL``, ``ONBUILD``, ``MAINTAINER``. Anything else, or
``RUN`` when not allowed, raises :class:`DockerfileError` naming the file, line and instruction.

>>> plan = parse_dockerfile("FROM python:3.11\\nWORKDIR /app\\nENV A=1 B=\\"two words\\"\\nCOPY data.txt /app/\\n")
>>> (plan.workdir, plan.env, plan.steps)
('/app', {'A': '1', 'B': 'two words'}, [('mkdir', [], '/app'), ('copy', ['data.txt'], '/app/')])
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from trajkit.envs.sandbox.base import bad_variable, inside_root
from trajkit.errors import InputError

IGNORED = {"FROM", "LABEL", "EXPOSE", "CMD", "ENTRYPOINT", "USER", "SHELL", "VOLUME", "HEALTHCHECK",
           "STOPSIGNAL", "ONBUILD", "MAINTAINER"}


class DockerfileError(InputError):
    """An instruction the daemon-less sandbox cannot honour (names the file, line and instruction)."""


@dataclass
class BuildPlan:
    """What a Dockerfile asks of the sandbox: the working directory, environment, and ordered steps
    ``("copy", [sources], dest)`` or ``("run", command, None)``."""

    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    steps: list[tuple] = field(default_factory=list)
    base: str | None = None


def _logical_lines(text: str):
    """(first line number, instruction line) with ``\\`` continuations joined and comments dropped."""
    buf, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1].rstrip() + " "
            continue
        yield start, buf + line
        buf = ""
    if buf:
        yield start, buf


def _words(rest: str, fail) -> list[str]:
    """``rest`` split as a shell would (quotes honoured); an unclosed quote is a :class:`DockerfileError`."""
    try:
        return shlex.split(rest)
    except ValueError as exc:  # shlex: "No closing quotation", "No escaped character"
        raise fail(f"{exc} in {rest[:80]!r}") from None


def parse_dockerfile(text: str, path: str = "Dockerfile", allow_run: bool = False) -> BuildPlan:
    plan, args = BuildPlan(), {}
    for line_no, line in _logical_lines(text):
        word, _, rest = line.partition(" ")
        op, rest = word.upper(), _substitute(rest.strip(), {**args, **plan.env})

        def fail(why: str) -> DockerfileError:
            return DockerfileError(f"{op}: {why}", path=path, row=line_no,
                                   hint="docs/envs.md lists what the daemon-less sandbox honours")
        if op == "FROM":
            plan.base = rest.split()[0] if rest else None
        elif op == "ARG":
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip().strip('"')
        elif op in IGNORED:
            continue
        elif "\0" in rest:
            raise fail("a NUL byte in the instruction")
        elif op == "WORKDIR":
            plan.workdir = inside_root(rest, plan.workdir or "/")
            plan.steps.append(("mkdir", [], plan.workdir))
        elif op == "ENV":
            pairs = _env_pairs(rest, fail)
            if bad_variable(pairs) is not None:
                raise fail(f"{bad_variable(pairs)!r} is not a variable name")
            plan.env.update(pairs)
        elif op in ("COPY", "ADD"):
            words = _words(rest, fail)
            if any(w.startswith("--from") for w in words):
                raise fail("--from (multi-stage builds) is not supported")
            words = [w for w in words if not w.startswith("--")]
            if len(words) < 2 or any("://" in w for w in words):
                raise fail("needs local sources and a destination (no URLs)")
            dest = inside_root(words[-1], plan.workdir or "/") + "/" * words[-1].endswith("/")
            plan.steps.append(("copy", words[:-1], dest))
        elif op == "RUN":
            if not allow_run:
                raise fail("not allowed: the daemon-less sandbox runs no build commands unless asked "
                           "(allow_run=True, `--allow-run`), and then on the host's userland, not the image's")
            plan.steps.append(("run", rest, None))
        else:
            raise fail("unknown or unsupported instruction")
    return plan


def _env_pairs(rest: str, fail) -> dict[str, str]:
    words = _words(rest, fail)
    if not words:
        raise fail("needs NAME=value")
    if "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}
    out = {}
    for w in words:
        name, eq, value = w.partition("=")
        if not eq:
            raise fail(f"{w!r} is not NAME=value")
        out[name] = value
    return out


def _substitute(text: str, values: dict[str, str]) -> str:
    """``$NAME`` and ``${NAME}`` from ARG defaults and earlier ENV values (unknown names are left as written)."""
    for name, value in sorted(values.items(), key=lambda kv: -len(kv[0])):
        text = text.replace("${" + name + "}", value).replace("$" + name, value)
    return text
