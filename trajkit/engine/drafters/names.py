"""The draft kinds' names, as plain data: what ``--drafter`` and ``draft.kind`` accept, and the kind a draft
folder's files tell (:func:`folder_kind`).

Kept apart from :mod:`.registry` (which imports torch to build and load drafters) so that argument parsers
can offer the choices without importing torch; ``tests/engine/test_draft_registry.py`` checks that this
list and the registry's kinds are the same.
"""

from pathlib import Path

# "none" (no drafter) first, then every kind in trajkit.engine.drafters.registry.DRAFT_KINDS, in order.
KIND_NAMES: tuple[str, ...] = ("none", "model", "window", "ngram", "eagle")

# the file each trainable kind's folder is known by (its saved shape); a folder with neither is a draft model
META_FILES: dict[str, str] = {"eagle": "eagle.json", "window": "window.json"}


def chosen_kind(drafter: str | None, draft, default: str = "none") -> str:
    """The kind a ``--drafter``/``--draft`` pair names: ``drafter`` when given, else the kind ``draft``'s files
    tell (:func:`folder_kind`), else ``default``."""
    if drafter:
        return drafter
    return folder_kind(draft) if draft else default


def folder_kind(folder) -> str:
    """The kind whose files ``folder`` holds (:data:`META_FILES`), else ``model`` (a Hugging Face folder,
    which its loader checks)."""
    folder = Path(folder)
    return next((kind for kind, name in META_FILES.items() if (folder / name).exists()), "model")
