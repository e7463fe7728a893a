"""Sketch hooks on chosen ``nn.Linear`` modules: the backward accumulates ``S = Hᵀ (X Aᵀ)`` and never a
dense weight gradient.

For a target ``y = x Wᵀ + b`` with ``X: [tokens, in]`` its input and ``H = dL/dy: [tokens, out]``, the dense
gradient is ``G = Hᵀ X: [out, in]``. With a projection ``A: [rank, in]`` (:mod:`trajkit.optim.projection`)
the forward keeps only ``X Aᵀ: [tokens, rank]`` (instead of ``X``) and the backward adds
``Hᵀ (X Aᵀ) = G Aᵀ: [out, rank]`` to the target's sketch. The weight is set to ``requires_grad=False``, so
autograd has no path that could build its ``.grad``; a zero-size ``trigger`` tensor that requires grad is
passed to the custom autograd function instead, so the backward still runs when nothing upstream needs a
gradient (frozen embeddings). ``grad_input = H W`` and the bias gradient (a normal parameter) are returned
as usual. All micro-batches of one optimiser step share the step's A, so sketches add up linearly.

The module's ``forward`` is replaced on the instance (parameter names, ``state_dict`` keys and
``deepcopy`` keep working; :meth:`Sketches.remove` restores it). Without grad mode the forward is the plain
``F.linear`` (generation, log-prob recompute); in the KL-prediction pass it also carries the first-order
change of the output as a forward-mode tangent (:mod:`trajkit.optim.kl`).
"""
from __future__ import annotations

import re
import types
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

from trajkit.optim.defaults import DEFAULT_TARGETS
from trajkit.optim.projection import DISTRIBUTIONS, make_projection, projection_seed


@dataclass
class SketchSettings:
    """Which modules are sketched (``targets``: a regex searched in each module's qualified name), the
    projection's ``rank`` and ``distribution``, and the base ``seed`` of the per-layer, per-step draws."""

    rank: int = 256
    distribution: str = "rademacher"
    seed: int = 0
    targets: str = DEFAULT_TARGETS

    def __post_init__(self) -> None:
        if not isinstance(self.rank, int) or self.rank < 1:
            raise ValueError(f"rank must be an integer >= 1, got {self.rank!r}")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {sorted(DISTRIBUTIONS)}, got {self.distribution!r}")
        try:
            re.compile(self.targets)
        except re.error as exc:
            raise ValueError(f"targets {self.targets!r} is not a valid regular expression: {exc}") from None


@dataclass(eq=False)
class SketchState:
    """One target: its qualified ``name``, ``module`` and ``weight: [out, in]``; ``sketch: [out, rank]``
    float32 (allocated on the first backward, ``None`` until then)."""

    name: str
    module: torch.nn.Linear
    sketches: Sketches
    sketch: torch.Tensor | None = None
    dtype: torch.dtype | None = None  # the weight's dtype in the last forward (FSDP2 may gather it in another)

    @property
    def weight(self) -> torch.Tensor:
        return self.module.weight

    def projection(self) -> torch.Tensor:
        """This step's ``A: [rank, in]`` in the weight's dtype (as the forward saw it), redrawn from the
        stable seed."""
        s = self.sketches.settings
        w = self.weight
        return make_projection(s.distribution, s.rank, w.shape[1], projection_seed(s.seed, self.name,
                               self.sketches.step), w.device, self.dtype or w.dtype)

    def accumulate(self, h: torch.Tensor, xa: torch.Tensor) -> None:
        """``S += Hᵀ (X Aᵀ)`` with ``h: [tokens, out]``, ``xa: [tokens, rank]``, accumulated in float32."""
        update = h.T @ xa
        if self.sketch is None:
            self.sketch = update.float() if update.dtype != torch.float32 else update
        else:
            self.sketch.add_(update)


@dataclass(eq=False)
class Sketches:
    """All targets of one model plus the shared clock: ``step`` (completed optimiser steps, which selects
    every target's A) and, during a KL prediction, ``tangent`` (state, input -> output tangent)."""

    settings: SketchSettings
    states: list[SketchState] = field(default_factory=list)
    step: int = 0
    tangent: Callable[[SketchState, torch.Tensor], torch.Tensor] | None = None
    trigger: torch.Tensor = field(default_factory=lambda: torch.empty(0, requires_grad=True))

    def zero_(self) -> None:
        for state in self.states:
            if state.sketch is not None:
                state.sketch.zero_()

    def remove(self) -> None:
        """Restore every target's own ``forward`` and ``requires_grad``."""
        for state in self.states:
            state.module.__dict__.pop("forward", None)
            state.module.__dict__.pop("_sketch", None)
            state.weight.requires_grad_(True)
        self.states = []


class _SketchLinear(torch.autograd.Function):
    """``y = x Wᵀ + b``; saves ``X Aᵀ`` (not X); backward: sketch += Hᵀ(X Aᵀ), returns grad of x and b only."""

    @staticmethod
    def forward(ctx, x, trigger, weight, bias, state, a):
        xa = x.reshape(-1, x.shape[-1]) @ a.T  # [tokens, rank]
        ctx.save_for_backward(xa, weight)  # weight: for grad_input, and its version counter
        ctx.state = state
        ctx.has_bias = bias is not None
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad_out):
        xa, weight = ctx.saved_tensors
        h = grad_out.reshape(-1, grad_out.shape[-1])  # [tokens, out]
        ctx.state.accumulate(h, xa)
        # under autocast H is low precision and the weight float32
        grad_x = grad_out @ weight.to(grad_out.dtype) if ctx.needs_input_grad[0] else None
        grad_b = h.sum(0) if ctx.has_bias and ctx.needs_input_grad[3] else None
        return grad_x, None, None, grad_b, None, None


def _sketched_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    state: SketchState = self._sketch
    if state.sketches.tangent is not None:
        y = F.linear(x, self.weight, self.bias)
        extra = state.sketches.tangent(state, fwAD.unpack_dual(x).primal)
        return y + fwAD.make_dual(torch.zeros_like(fwAD.unpack_dual(y).primal), extra.reshape(y.shape))
    if not torch.is_grad_enabled():
        return F.linear(x, self.weight, self.bias)
    state.dtype = self.weight.dtype
    return _SketchLinear.apply(x, state.sketches.trigger, self.weight, self.bias, state, state.projection())


def select_targets(model: torch.nn.Module, pattern: str) -> list[tuple[str, torch.nn.Linear]]:
    """``(name, module)`` for every ``nn.Linear`` whose qualified name matches ``pattern`` (re.search)."""
    regex = re.compile(pattern)
    return [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.Linear) and regex.search(name)]


def install_sketches(model: torch.nn.Module, settings: SketchSettings | None = None) -> Sketches:
    """Sketch every target of ``model``; their weights stop requiring grad. Raises when nothing matches."""
    settings = settings or SketchSettings()
    found = select_targets(model, settings.targets)
    if not found:
        linears = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)][:6]
        raise ValueError(f"no nn.Linear module name matches targets={settings.targets!r}; "
                         f"the model's linear modules are named like {linears}")
    sketches = Sketches(settings)
    for name, module in found:
        if "_sketch" in module.__dict__:
            raise ValueError(f"module {name!r} already has sketch hooks (install once per model)")
        state = SketchState(name, module, sketches)
        module._sketch = state
        module.forward = types.MethodType(_sketched_forward, module)
        module.weight.requires_grad_(False)
        sketches.states.append(state)
    return sketches
