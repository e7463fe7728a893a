"""Local training text for the shipped tiny models (nothing is downloaded).

Sources (``source="auto"`` takes the first available):

- ``traces``: conversations from trajkit's seeded synthetic agent-trace generator (:mod:`trajkit.synth`,
  both styles), rendered by the byte tokenizer's chat template (:mod:`trajkit.models.chat`) without the
  ~26k-character system prompt: think blocks, narration, ``<tool_call>`` JSON and tool responses, laid out
  exactly as the RL environments and the engine's prompts lay them out.
- ``stdlib``: the source files of Python's standard library, in sorted order (a fallback when the trace
  generator is not installed; it depends on the Python version, which the cache key records).

The corpus is a deterministic function of ``(source, seed, max_bytes)``; its SHA-256 goes into the
cache key of the trained pair.
"""
from __future__ import annotations

import hashlib
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from trajkit.errors import ConfigError

Source = Literal["auto", "traces", "stdlib"]
_RESPONSE = re.compile(r"<tool_response>\n?(.*?)\n?</tool_response>", re.S)


@dataclass
class Corpus:
    parts: list[str]  # conversations (or files); ``text`` is their concatenation
    source: str

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def load_corpus(source: Source = "auto", seed: int = 0, max_bytes: int = 2_000_000) -> Corpus:
    """At most ``max_bytes`` of text from ``source``."""
    builders = {"traces": _traces_parts, "stdlib": _stdlib_parts}
    if source == "auto":
        try:
            return Corpus(_traces_parts(seed, max_bytes), "traces")
        except ImportError:
            return Corpus(_stdlib_parts(seed, max_bytes), "stdlib")
    if source not in builders:
        raise ConfigError(f"corpus source must be one of auto, traces, stdlib; got {source!r}")
    return Corpus(builders[source](seed, max_bytes), source)


def chat_messages(conversations: list[dict]) -> list[dict]:
    """Hermes ``{from, value}`` turns (system dropped) -> chat messages; a tool turn's
    ``<tool_response>`` blocks become one ``tool`` message each (the template wraps them again)."""
    out = []
    for m in conversations:
        if m["from"] == "human":
            out.append({"role": "user", "content": m["value"]})
        elif m["from"] == "gpt":
            out.append({"role": "assistant", "content": m["value"]})
        elif m["from"] == "tool":
            bodies = _RESPONSE.findall(m["value"]) or [m["value"]]
            out.extend({"role": "tool", "content": b} for b in bodies)
    return out


def _traces_parts(seed: int, max_bytes: int) -> list[str]:
    from trajkit.models.chat import render
    from trajkit.models.tokenizer import byte_tokenizer
    from trajkit.synth import SynthConfig, generate

    tok = byte_tokenizer()
    parts, size, start = [], 0, 0
    while size < max_bytes:
        for style in ("kimi", "glm-5.1"):
            for row in generate(SynthConfig(rows=50, style=style, seed=seed, start=start)):
                text = render(tok, chat_messages(row["conversations"]))
                parts.append(text)
                size += len(text.encode("utf-8"))
        start += 50
    return _cut(parts, max_bytes)


def _stdlib_parts(seed: int, max_bytes: int) -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if not p.name.startswith("_"))
    parts, size = [], 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace") + "\n"
        parts.append(text)
        size += len(text.encode("utf-8"))
        if size >= max_bytes:
            break
    if not parts:
        raise ConfigError(f"no Python standard library sources found under {root}")
    return _cut(parts, max_bytes)


def _cut(parts: list[str], max_bytes: int) -> list[str]:
    """The first ``max_bytes`` bytes of the concatenation, still as parts."""
    out, size = [], 0
    for part in parts:
        data = part.encode("utf-8")
        if size + len(data) > max_bytes:
            out.append(data[:max_bytes - size].decode("utf-8", errors="ignore"))
            break
        out.append(part)
        size += len(data)
    return out
