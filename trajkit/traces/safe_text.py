"""Untrusted names (categories, tool names, ids, file names) made safe to show.

* :func:`printable` for a terminal: control characters (ANSI/OSC escape sequences, carriage returns, C1
  codes) and bidi controls are written as ``\\xNN`` / ``\\uNNNN``, so a name cannot restyle or rewrite
  the screen.
* :func:`mark_bidi` for the HTML report: bidi controls (U+202E reverses the text after it) become a
  visible ``[U+202E]`` so an id or title reads as stored; HTML escaping is separate
  (:func:`trajkit.traces.report_viewer.esc`).
"""
from __future__ import annotations

BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def printable(name: str) -> str:
    """``name`` with every non-printable or bidi character escaped."""
    return "".join(ch if ch.isprintable() and ch not in BIDI_CONTROLS else
                   (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}") for ch in name)


def mark_bidi(text: str) -> str:
    """``text`` with each bidi control replaced by a visible ``[U+XXXX]`` mark."""
    if not any(ch in BIDI_CONTROLS for ch in text):
        return text
    return "".join(f"[U+{ord(ch):04X}]" if ch in BIDI_CONTROLS else ch for ch in text)
