"""The draft kinds' names, as plain data: what ``--drafter`` and ``draft.kind`` accept, and the kind a draft
folder's files tell (:func:`folder_kind`).

Kept apart from :mod:`.registry` (which imports torch to build and load drafters) so that argument parsers
can offer the choices without importing torch; ``tests/engine/test_draft_registry.py`` checks that this
list and the registry's kinds are the same.
"""

# "none" (no drafter) first, then every kind in trajkit.engine.drafters.registry.DRAFT_KINDS, in order.
KIND_NAMES: tuple[str, ...] = ("none", "model", "window", "ngram", "eagle")


def folder_kind(folder) -> str:
    """The kind whose files ``folder`` holds: ``eagle`` (``eagle.json``), ``window`` (``window.json``), else
    ``model`` (a Hugging Face folder, which its loader checks)."""
    from pathlib import Path

    folder = Path(folder)
    return "eagle" if (folder / "eagle.json").exists() else "window" if (folder / "window.json").exists() else "model"
