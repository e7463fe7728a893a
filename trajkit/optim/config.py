"""The ``optim`` section of a run's config: the policy's optimiser and its knobs, beside the optimisers.

Read without importing torch (the CLI builds its flags from it); :mod:`trajkit.rl.update` builds the optimiser.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from trajkit.config import Checked
from trajkit.errors import ConfigError
from trajkit.optim.defaults import DEFAULT_TARGETS


@dataclass
class OptimConfig(Checked):
    """The policy's optimiser (``name``: ``adamw``; ``logra``: low-rank gradient sketches with RowAdam,
    see docs/optim.md, its knobs are the ``logra_*`` keys and ``kl_budget``, 0 = off; ``muon``:
    ``torch.optim.Muon`` on the hidden weight matrices and AdamW (``lr``, ``beta1``, ``beta2``,
    ``weight_decay``) on the embedding, output layer, norms and biases, :mod:`trajkit.optim.muon`, its knobs
    the ``muon_*`` keys: ``muon_lr`` 0 = ``lr``, ``muon_weight_decay``, ``muon_momentum``, ``muon_nesterov``,
    ``muon_adjust_lr`` (torch's shape-based rate: ``match_rms_adamw`` = 0.2 sqrt(max(out, in)) x lr, Moonshot's,
    made for reusing AdamW's rate; ``original`` = sqrt(max(1, out/in)) x lr, Keller Jordan's, wants a rate
    near 0.02), ``muon_ns_steps`` Newton-Schulz iterations; LoGRA and Muon are exclusive); ``minibatches``
    optimiser steps per RL step, each over micro-batches of ``micro_batch_size`` rows (also the logprob
    stage's forward batch); ``gradient_checkpointing`` recomputes each decoder layer's activations in the
    backward (Hugging Face activation checkpointing); ``logits_chunk`` > 0 computes the policy's token
    log-probs ``logits_chunk`` positions at a time (:mod:`trajkit.models.logprobs`: the ``[B, L, V]``
    logits never exist at once; same values). LoGRA's sketched weights have no ``.grad``, so
    ``grad_clip`` clips only its other parameters (the vocabulary matrices included); ``logra_embeddings``:
    ``rows`` steps the embedding and output layer with RowAdam on their exact gradient, ``adamw`` with the
    nested AdamW (see trajkit.optim.embeddings). ``lr`` defaults to TRL's GRPO rate (1e-6, for real
    models; the toy configs set their own), ``lr_schedule`` over the run's steps after ``warmup_steps`` of
    linear warm-up (TRL's ``lr_scheduler_type``; :func:`trajkit.rl.update.lr_factor`). ``num_iterations`` (GRPO's mu): passes of ``minibatches``
    optimiser steps over each step's rollouts; after the first, the ratio to the rollout policy's
    log-probs leaves 1 and the loss's clipping acts."""

    name: Literal["adamw", "logra", "muon"] = "adamw"
    lr: float = 1e-6
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = 0
    num_iterations: int = 1
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0
    micro_batch_size: int = 32
    minibatches: int = 1
    gradient_checkpointing: bool = False
    logits_chunk: int = 0
    logra_rank: int = 256
    logra_distribution: Literal["rademacher", "gaussian", "orthogonal"] = "rademacher"
    logra_seed: int = 0
    logra_eps: float = 1e-8
    logra_targets: str = DEFAULT_TARGETS
    logra_embeddings: Literal["rows", "adamw"] = "rows"
    kl_budget: float = 0.0
    muon_lr: float = 0.0
    muon_weight_decay: float = 0.0
    muon_momentum: float = 0.95
    muon_nesterov: bool = True
    muon_adjust_lr: Literal["match_rms_adamw", "original"] = "match_rms_adamw"
    muon_ns_steps: int = 5

    __section__ = "optim"
    __ranges__ = {"lr": "(0, inf)", "weight_decay": "[0, inf)", "beta1": "[0, 1)", "beta2": "[0, 1)",
                  "grad_clip": "(0, inf)", "micro_batch_size": "[1, inf)", "minibatches": "[1, inf)",
                  "num_iterations": "[1, inf)", "warmup_steps": "[0, inf)", "logits_chunk": "[0, inf)", "logra_rank": "[1, inf)", "logra_seed": "[0, inf)", "logra_eps": "[0, inf)",
                  "kl_budget": "[0, inf)", "muon_lr": "[0, inf)", "muon_weight_decay": "[0, inf)",
                  "muon_momentum": "[0, 1)", "muon_ns_steps": "[1, 99]"}

    def validate(self) -> None:
        """Settings of one optimiser given while another is chosen are refused (LoGRA's sketched weights
        never hold the dense gradient Muon orthogonalises, so the two do not compose)."""
        for prefix, owner in (("logra_", "logra"), ("muon_", "muon")):
            if self.name == owner:
                continue
            changed = [f.name for f in dataclasses.fields(self) if f.name.startswith(prefix) or
                       (owner == "logra" and f.name == "kl_budget")]
            changed = [k for k in changed if getattr(self, k) != _OPTIM_DEFAULTS[k]]
            if changed:
                extra = (" (LoGRA and Muon are mutually exclusive: LoGRA's sketched weights never hold the "
                         "dense gradient that Muon orthogonalises)") if self.name in ("logra", "muon") else ""
                raise ConfigError(f"optim.{changed[0]} is a setting of optim.name={owner}, but "
                                  f"optim.name={self.name}{extra}; set optim.name={owner} or drop "
                                  f"{', '.join('optim.' + k for k in changed)}")


_OPTIM_DEFAULTS = {f.name: f.default for f in dataclasses.fields(OptimConfig)}
