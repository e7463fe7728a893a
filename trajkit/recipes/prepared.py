"""Models trajkit prepares offline, by name: ``trajkit models prepare NAME`` and ``source: prepared`` in
RL configs (``policy.path`` / ``draft.model.path``)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from trajkit.recipes.smollm2 import NAME, prepare_model

DRAFT_NAME = NAME + "-draft"
EAGLE_NAME = NAME + "-eagle"


def _smollm2_draft(root: Path | None = None) -> Path:
    """SmolLM2's distilled shortlist draft (:mod:`trajkit.recipes.smollm2_draft`, default recipe; imported
    here, not at start-up: the CLI lists these names without loading torch)."""
    from trajkit.recipes.smollm2_draft import DraftRecipe, prepare_draft

    return prepare_draft(DraftRecipe(), root)


def _smollm2_eagle(root: Path | None = None) -> Path:
    """SmolLM2's EAGLE-style draft head (:mod:`trajkit.recipes.smollm2_eagle`, default recipe)."""
    from trajkit.recipes.smollm2_eagle import EagleRecipe, prepare_eagle

    return prepare_eagle(EagleRecipe(), root)


PREPARE: dict[str, Callable[..., Path]] = {NAME: prepare_model, DRAFT_NAME: _smollm2_draft,
                                           EAGLE_NAME: _smollm2_eagle}
