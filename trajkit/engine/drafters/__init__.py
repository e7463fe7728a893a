"""Drafters behind one protocol (:mod:`.base`): a small LM (:mod:`.model`), n-gram prompt lookup
(:mod:`.ngram`), the window MLP (:mod:`.window`), and the registry of draft kinds (:mod:`.registry`)."""
from trajkit.engine.drafters.base import Drafter, Proposal, Warp, check_vocab
from trajkit.engine.drafters.model import DraftModel
from trajkit.engine.drafters.ngram import NgramDrafter
from trajkit.engine.drafters.registry import DRAFT_KINDS, KIND_NAMES, DraftShape, draft_kind
from trajkit.engine.drafters.window import WindowDrafter, WindowDraftNet

__all__ = ["Drafter", "Proposal", "Warp", "check_vocab", "DraftModel", "NgramDrafter", "WindowDrafter",
           "WindowDraftNet", "DRAFT_KINDS", "KIND_NAMES", "DraftShape", "draft_kind"]
