"""``trajkit traces synth``."""
from __future__ import annotations


def register(tsub, add_common) -> None:
    return None
