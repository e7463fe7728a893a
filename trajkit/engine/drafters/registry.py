"""Draft kinds by name: how each drafter is built, saved, loaded and wrapped for the engine.

``draft.kind`` in the RL config and ``--drafter`` on the CLI name an entry of :data:`DRAFT_KINDS`
("none" means no drafter). Each kind answers the same questions, so no caller dispatches on the name:

============  =========  =====================================================================
kind          trainable  weights
============  =========  =====================================================================
``model``     yes        a small Hugging Face causal LM (``save_pretrained`` folder)
``window``    yes        :class:`~trajkit.engine.drafters.window.WindowDraftNet` (``window.pt`` +
                         ``window.json``)
``ngram``     no         none: prompt lookup over the row's own tokens
``eagle``     yes        :class:`~trajkit.engine.drafters.eagle.EagleHead` over the target's hidden
                         states (``eagle.pt`` + ``eagle.json``; the target's embedding, norm and
                         output layer are shared, not saved)
============  =========  =====================================================================

``build`` and ``load`` take the ``target`` too (keyword): a kind that drafts from the target's features
(``eagle``) needs it; the others ignore it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from trajkit.engine.drafters.base import Drafter
from trajkit.engine.drafters.names import KIND_NAMES, META_FILES
from trajkit.errors import ConfigError


@dataclass(frozen=True)
class DraftShape:
    """Shape of a drafter with weights. ``model``: a Llama of this size; ``window``: ``hidden_size`` is the
    embedding width, ``intermediate_size`` the MLP width, ``head``/``window`` the context tokens."""

    hidden_size: int = 64
    num_layers: int = 1
    num_heads: int = 2
    intermediate_size: int = 192
    init_seed: int = 1
    head: int = 8
    window: int = 8
    max_positions: int = 1024


class DraftKind(Protocol):
    name: str
    trainable: bool

    def build(self, vocab_size: int, shape: DraftShape, target=None) -> torch.nn.Module | None:
        """Fresh weights of ``shape`` (None for a kind without weights)."""

    def drafter(self, net: torch.nn.Module | None) -> Drafter:
        """The engine-side drafter around ``net`` (an inference copy)."""

    def save(self, net: torch.nn.Module, folder: str | Path) -> None: ...

    def load(self, folder: str | Path, target=None) -> torch.nn.Module: ...


class ModelKind:
    name, trainable = "model", True

    def build(self, vocab_size: int, shape: DraftShape, target=None):
        from trajkit.models.spec import TinySpec, build_model

        spec = TinySpec(vocab_size=vocab_size, hidden_size=shape.hidden_size, num_layers=shape.num_layers,
                        num_heads=shape.num_heads, num_kv_heads=shape.num_heads,
                        intermediate_size=shape.intermediate_size, max_positions=shape.max_positions)
        return build_model(spec, seed=shape.init_seed)

    def drafter(self, net) -> Drafter:
        from trajkit.engine.drafters.model import DraftModel

        return DraftModel(net)

    def save(self, net, folder) -> None:
        net.save_pretrained(str(folder))

    def load(self, folder, target=None):
        from trajkit.models.load import load_model
        from trajkit.models.shortlist import ShortlistLM, is_shortlist_folder

        if is_shortlist_folder(folder):
            return ShortlistLM.from_pretrained(folder)
        return load_model(folder, what="draft")


class WindowKind:
    name, trainable = "window", True

    def build(self, vocab_size: int, shape: DraftShape, target=None):
        from trajkit.engine.drafters.window import WindowDraftNet

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(shape.init_seed)
            return WindowDraftNet(vocab_size, shape.hidden_size, shape.intermediate_size, shape.head,
                                  shape.window, shape.max_positions)

    def drafter(self, net) -> Drafter:
        from trajkit.engine.drafters.window import WindowDrafter

        return WindowDrafter(net)

    def save(self, net, folder) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(net.state_dict(), folder / "window.pt")
        (folder / META_FILES["window"]).write_text(json.dumps({
            "vocab_size": net.vocab_size, "hidden_size": net.dim, "intermediate_size": net.hidden,
            "head": net.head, "window": net.window, "max_positions": net.max_positions}))

    def load(self, folder, target=None):
        folder = Path(folder)
        if not (folder / META_FILES["window"]).exists():
            raise ConfigError(f"draft: {folder} holds no window drafter ({META_FILES['window']} missing)")
        meta = json.loads((folder / META_FILES["window"]).read_text())
        net = self.build(meta.pop("vocab_size"), DraftShape(**meta))
        net.load_state_dict(torch.load(folder / "window.pt", weights_only=True))
        return net.eval()


class NgramKind:
    name, trainable = "ngram", False

    def build(self, vocab_size: int, shape: DraftShape, target=None):
        return None

    def drafter(self, net) -> Drafter:
        from trajkit.engine.drafters.ngram import NgramDrafter

        return NgramDrafter()

    def save(self, net, folder) -> None:
        """No weights to save."""

    def load(self, folder, target=None):
        return None


class EagleKind:
    name, trainable = "eagle", True

    def build(self, vocab_size: int, shape: DraftShape, target=None):
        from trajkit.engine.drafters.eagle import EagleHead, default_layers

        if target is None:
            raise ConfigError("draft.kind=eagle drafts from the target's hidden states: build it with the target")
        return EagleHead(target, default_layers(target), init_seed=shape.init_seed)

    def drafter(self, net) -> Drafter:
        from trajkit.engine.drafters.eagle import EagleDrafter

        return EagleDrafter(net)

    def save(self, net, folder) -> None:
        net.save(folder)

    def load(self, folder, target=None):
        from trajkit.engine.drafters.eagle import EagleHead

        if target is None:
            raise ConfigError("draft.kind=eagle: loading the head needs the target it was trained on")
        return EagleHead.load(folder, target)


DRAFT_KINDS: dict[str, DraftKind] = {k.name: k for k in (ModelKind(), WindowKind(), NgramKind(), EagleKind())}


def draft_kind(name: str) -> DraftKind | None:
    """The kind called ``name``; None for "none"; ConfigError naming the known kinds otherwise."""
    if name == "none":
        return None
    if name not in DRAFT_KINDS:
        raise ConfigError(f"draft kind must be one of {list(KIND_NAMES)}, got {name!r}")
    return DRAFT_KINDS[name]
