"""Drafters behind one protocol (:mod:`.base`): a small LM (:mod:`.model`), n-gram prompt lookup
(:mod:`.ngram`), the window MLP (:mod:`.window`), the EAGLE-style head
(:mod:`.eagle`), and the registry of draft kinds (:mod:`.registry`).

The exports load lazily (PEP 562): :mod:`.names` (the kinds' names, for argument parsers) imports nothing
heavy, and importing it must not pull in torch through this package.
"""
from trajkit._lazy import lazy_getattr

_EXPORTS = {
    "Drafter": "trajkit.engine.drafters.base",
    "Proposal": "trajkit.engine.drafters.base",
    "Warp": "trajkit.engine.drafters.base",
    "check_vocab": "trajkit.engine.drafters.base",
    "DraftModel": "trajkit.engine.drafters.model",
    "NgramDrafter": "trajkit.engine.drafters.ngram",
    "WindowDrafter": "trajkit.engine.drafters.window",
    "WindowDraftNet": "trajkit.engine.drafters.window",
    "EagleHead": "trajkit.engine.drafters.eagle",
    "EagleDrafter": "trajkit.engine.drafters.eagle",
    "DRAFT_KINDS": "trajkit.engine.drafters.registry",
    "KIND_NAMES": "trajkit.engine.drafters.names",
    "DraftShape": "trajkit.engine.drafters.registry",
    "draft_kind": "trajkit.engine.drafters.registry",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
