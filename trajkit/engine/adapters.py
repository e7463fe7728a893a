"""LoRA adapters on the engine's model: the payload of an adapter-only weight sync, and its merge.

A LoRA adapter (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models") changes a linear
layer's weight ``W: [out, in]`` to ``W + scale * B @ A`` with ``A: [r, in]``, ``B: [out, r]`` and
``scale = alpha / r``. The trainer (:mod:`trajkit.rl.lora`, peft) trains only ``A`` and ``B``; a weight
sync then sends only them (:class:`LoraAdapter`, a few MB instead of the whole model) and the engine
merges them into its own copy (:class:`AdapterMerger`): it keeps the base weight of every layer an
adapter touched and sets ``W = W_base + scale * B @ A`` (computed in float32, cast to the engine's dtype),
so the engine samples from exactly the merged model. A layer a later adapter leaves out gets its base
weight back. An output layer tied to the embedding (SmolLM2) is untied on the engine's copy before the
merge, as the adapter changes the output layer only.

No peft here: the payload is plain tensors keyed by the Hugging Face module name of the engine's model
(``model.layers.0.self_attn.q_proj``), so a Ray actor or the Tinker server can build and ship one.

>>> import torch
>>> lin = torch.nn.Linear(2, 2, bias=False)
>>> with torch.no_grad(): _ = lin.weight.copy_(torch.eye(2))
>>> net = torch.nn.Sequential(lin)
>>> a = LoraAdapter({"0": (torch.ones(1, 2), torch.ones(2, 1))}, scale=0.5)
>>> merger = AdapterMerger(net)
>>> merger.apply(a); lin.weight.tolist()
[[1.5, 0.5], [0.5, 1.5]]
>>> merger.apply(LoraAdapter({}, scale=1.0)); lin.weight.tolist()
[[1.0, 0.0], [0.0, 1.0]]
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from trajkit.errors import ConfigError


@dataclass
class LoraAdapter:
    """``modules``: HF module name -> ``(A [r, in], B [out, r])``; ``scale``: ``alpha / r``."""

    modules: dict[str, tuple[torch.Tensor, torch.Tensor]]
    scale: float

    def numel(self) -> int:
        """The number of values a sync of this adapter sends."""
        return sum(a.numel() + b.numel() for a, b in self.modules.values())

    def delta(self, name: str) -> torch.Tensor:
        """``scale * B @ A`` of module ``name``, float32 ``[out, in]``."""
        a, b = self.modules[name]
        return self.scale * (b.float() @ a.float())


class AdapterMerger:
    """Merges :class:`LoraAdapter` s into ``model`` in place, keeping each touched layer's base weight."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.base: dict[str, torch.Tensor] = {}

    def _layer(self, name: str) -> torch.nn.Module:
        try:
            layer = self.model.get_submodule(name)
        except AttributeError:
            raise ConfigError(f"adapter: the engine's model has no module {name!r}") from None
        if not isinstance(getattr(layer, "weight", None), torch.Tensor) or layer.weight.dim() != 2:
            raise ConfigError(f"adapter: module {name!r} of the engine's model has no 2-d weight")
        return layer

    def _keep_base(self, name: str, layer: torch.nn.Module) -> None:
        if name in self.base:
            return
        weight = layer.weight
        shared = any(p is weight for n, p in self.model.named_parameters(remove_duplicate=False)
                     if not n.startswith(name + "."))
        if shared:  # a tied output layer: give it its own tensor before changing it
            layer.weight = torch.nn.Parameter(weight.detach().clone(), requires_grad=False)
        self.base[name] = layer.weight.detach().clone()

    @torch.no_grad()
    def apply(self, adapter: LoraAdapter) -> None:
        """Set every adapted layer to base + delta and every other layer adapted before back to base."""
        for name in adapter.modules:
            layer = self._layer(name)
            self._keep_base(name, layer)
            base = self.base[name]
            delta = adapter.delta(name)
            if delta.shape != base.shape:
                raise ConfigError(f"adapter: module {name!r} has weight {tuple(base.shape)}, the adapter's "
                                  f"B @ A is {tuple(delta.shape)}")
            layer.weight.copy_((base.float() + delta.to(base.device)).to(base.dtype))
        for name, base in self.base.items():
            if name not in adapter.modules:
                self._layer(name).weight.copy_(base)
