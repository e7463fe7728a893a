"""The ``optim`` section of a run's config: the policy's optimiser and its knobs, beside the optimisers.

Read without importing torch (the CLI builds its flags from it); :mod:`trajkit.rl.update` builds the optimiser.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from trajkit.config import Checked, Kinded
from trajkit.errors import ConfigError
from trajkit.optim.defaults import DEFAULT_TARGETS


@dataclass
class AdamwOptions(Checked):
    """``optim.name=adamw``: torch's AdamW; ``kernel`` is how torch runs its step. ``auto`` (the default): the
    fused kernel where torch has one for the parameters (CPU and CUDA tensors; not FSDP2's DTensors, which
    keep torch's default), as Hugging Face's Trainer and so TRL do by default (``adamw_torch_fused``);
    ``fused``: that kernel or an error; ``foreach``: the multi-tensor loop; ``loop``: one tensor at a time.
    The kernels agree to float32 rounding, not bitwise (fused against loop: within 6e-8 on SmolLM2-135M's
    first step, docs/rl.md); on 2 CPU cores the fused step of SmolLM2-135M takes 0.10 s against 0.25 s."""

    kernel: Literal["auto", "fused", "foreach", "loop"] = "auto"

    __section__ = "optim.adamw"


@dataclass
class LograOptions(Checked):
    """``optim.name=logra``: low-rank gradient sketches with RowAdam (docs/optim.md): ``rank``, the projections'
    ``distribution`` and ``seed``, RowAdam's ``eps``, ``targets`` (a regex on module names), ``embeddings``
    (``rows``: the embedding and output layer stepped by RowAdam on their exact gradient; ``adamw``: by the nested
    AdamW, see trajkit.optim.embeddings), ``kl_budget`` (0 = off). LoGRA's sketched weights have no ``.grad``,
    so ``optim.grad_clip`` clips only its other parameters (the vocabulary matrices included)."""

    rank: int = 256
    distribution: Literal["rademacher", "gaussian", "orthogonal"] = "rademacher"
    seed: int = 0
    eps: float = 1e-8
    targets: str = DEFAULT_TARGETS
    embeddings: Literal["rows", "adamw"] = "rows"
    kl_budget: float = 0.0

    __section__ = "optim.logra"
    __ranges__ = {"rank": "[1, inf)", "seed": "[0, inf)", "eps": "[0, inf)", "kl_budget": "[0, inf)"}


@dataclass
class MuonOptions(Checked):
    """``optim.name=muon``: ``torch.optim.Muon`` on the hidden weight matrices (AdamW with ``optim.lr``,
    ``beta1``, ``beta2``, ``weight_decay`` on the embedding, output layer, norms and biases,
    :mod:`trajkit.optim.muon`): ``lr`` (0 = ``optim.lr``), ``weight_decay``, ``momentum``, ``nesterov``,
    ``adjust_lr`` (torch's shape-based rate: ``match_rms_adamw`` = 0.2 sqrt(max(out, in)) x lr, Moonshot's, made
    for reusing AdamW's rate; ``original`` = sqrt(max(1, out/in)) x lr, Keller Jordan's, wants a rate near
    0.02), ``ns_steps`` Newton-Schulz iterations."""

    lr: float = 0.0
    weight_decay: float = 0.0
    momentum: float = 0.95
    nesterov: bool = True
    adjust_lr: Literal["match_rms_adamw", "original"] = "match_rms_adamw"
    ns_steps: int = 5

    __section__ = "optim.muon"
    __ranges__ = {"lr": "[0, inf)", "weight_decay": "[0, inf)", "momentum": "[0, 1)", "ns_steps": "[1, 99]"}


# optim.name -> its own section (``optim.KIND: {...}``, read as ``optim.options``), for an optimiser with knobs of
# its own; the optimisers themselves are trajkit.optim.build.OPTIMIZERS (torch), the registry of names.
OPTIONS: dict[str, type] = {"adamw": AdamwOptions, "logra": LograOptions, "muon": MuonOptions}
BUILT_IN = ("adamw", "logra", "muon")  # the names trajkit.optim.build.OPTIMIZERS ships with

# the flat keys of configs before the optimisers had sections -> (kind, key in its section)
_FLAT = {**{f"logra_{f.name}": ("logra", f.name) for f in dataclasses.fields(LograOptions) if f.name != "kl_budget"},
         "kl_budget": ("logra", "kl_budget"),
         **{f"muon_{f.name}": ("muon", f.name) for f in dataclasses.fields(MuonOptions)}}


@dataclass
class OptimConfig(Kinded):
    """The policy's optimiser: ``name`` one of :data:`trajkit.optim.build.OPTIMIZERS` (``adamw``; ``logra``;
    ``muon``), the settings of one with a section in :data:`OPTIONS`
    under its name (``optim: {name: muon, muon: {momentum: 0.9}}``, read as ``optim.options``; LoGRA and Muon
    are exclusive: LoGRA's sketched weights never hold the dense gradient Muon orthogonalises). ``minibatches``
    optimiser steps per RL step, each over micro-batches of ``micro_batch_size`` rows (also the logprob
    stage's forward batch); ``gradient_checkpointing`` recomputes each decoder layer's activations in the
    backward (Hugging Face activation checkpointing); ``logits_chunk`` > 0 computes the policy's token
    log-probs ``logits_chunk`` positions at a time (:mod:`trajkit.models.logprobs`: the ``[B, L, V]``
    logits never exist at once; same values). ``lr`` defaults to TRL's GRPO rate (1e-6, for real
    models; the toy configs set their own), ``lr_schedule`` over the run's steps after ``warmup_steps`` of
    linear warm-up (TRL's ``lr_scheduler_type``; :func:`trajkit.rl.update.lr_factor`). ``num_iterations``
    (GRPO's mu): passes of ``minibatches`` optimiser steps over each step's rollouts; after the first, the
    ratio to the rollout policy's log-probs leaves 1 and the loss's clipping acts. The flat keys of older
    configs (``optim.muon_lr``, ``optim.logra_rank``, ``optim.kl_budget``) are read into the section, with a
    warning; one of another optimiser than ``name`` is refused when set."""

    name: str = "adamw"
    lr: float = 1e-6
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = 0
    num_iterations: int = 1
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-8
    grad_clip: float = 1.0
    micro_batch_size: int = 32
    minibatches: int = 1
    gradient_checkpointing: bool = False
    logits_chunk: int = 0
    options: Any = None

    __section__ = "optim"
    __ranges__ = {"lr": "(0, inf)", "weight_decay": "[0, inf)", "beta1": "[0, 1)", "beta2": "[0, 1)",
                  "eps": "(0, inf)", "grad_clip": "(0, inf)", "micro_batch_size": "[1, inf)",
                  "minibatches": "[1, inf)", "num_iterations": "[1, inf)", "warmup_steps": "[0, inf)",
                  "logits_chunk": "[0, inf)"}
    __flat__ = _FLAT

    @classmethod
    def kinds(cls) -> dict[str, type | None]:
        return {**dict.fromkeys(BUILT_IN), **OPTIONS}

    def validate(self) -> None:
        if self.name in BUILT_IN:
            return
        from trajkit.optim.build import OPTIMIZERS  # torch: only for a name trajkit does not ship

        if self.name not in OPTIMIZERS:
            raise ConfigError(f"optim.name must be one of {sorted(OPTIMIZERS)} (trajkit.optim.build.OPTIMIZERS), "
                              f"got {self.name!r}")
