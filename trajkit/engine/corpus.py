"""Local training text for the shipped tiny models (nothing is downloaded).

Sources (``source="auto"`` takes the first available):

- ``traces``: conversations from trajkit's seeded synthetic agent-trace generator
  (:mod:`trajkit.traces.synth`, both styles), rendered as ChatML turns (``<|im_start|>role\\n...<|im_end|>``)
  without the ~26k-character system prompt. This is the in-domain text of trajkit's rollouts: think
  blocks, narration, ``<tool_call>`` JSON and tool responses.
- ``stdlib``: the source files of Python's standard library, in sorted order (a fallback when the trace
  generator is not installed; it depends on the Python version, which the cache key records).

The corpus is a deterministic function of ``(source, seed, max_bytes)``; its SHA-256 goes into the
cache key of the trained pair.
"""
from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from trajkit.errors import ConfigError

Source = Literal["auto", "traces", "stdlib"]
ROLES = {"human": "user", "gpt": "assistant", "tool": "tool"}


@dataclass
class Corpus:
    text: str
    source: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def load_corpus(source: Source = "auto", seed: int = 0, max_bytes: int = 2_000_000) -> Corpus:
    """At most ``max_bytes`` of text from ``source``."""
    builders = {"traces": _traces_text, "stdlib": _stdlib_text}
    if source == "auto":
        try:
            return Corpus(_traces_text(seed, max_bytes), "traces")
        except ImportError:
            return Corpus(_stdlib_text(seed, max_bytes), "stdlib")
    if source not in builders:
        raise ConfigError(f"corpus source must be one of auto, traces, stdlib; got {source!r}")
    return Corpus(builders[source](seed, max_bytes), source)


def _traces_text(seed: int, max_bytes: int) -> str:
    from trajkit.synth import SynthConfig, generate

    parts, size, start = [], 0, 0
    while size < max_bytes:
        for style in ("kimi", "glm-5.1"):
            for row in generate(SynthConfig(rows=50, style=style, seed=seed, start=start)):
                turn = "".join(f"<|im_start|>{ROLES[m['from']]}\n{m['value']}<|im_end|>\n"
                               for m in row["conversations"] if m["from"] in ROLES)
                parts.append(turn)
                size += len(turn.encode("utf-8"))
        start += 50
    return _cut("".join(parts), max_bytes)


def _stdlib_text(seed: int, max_bytes: int) -> str:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if not p.name.startswith("_"))
    parts, size = [], 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        parts.append(text)
        size += len(text.encode("utf-8"))
        if size >= max_bytes:
            break
    if not parts:
        raise ConfigError(f"no Python standard library sources found under {root}")
    return _cut("\n".join(parts), max_bytes)


def _cut(text: str, max_bytes: int) -> str:
    return text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")
