"""The policy side of a step: the ``weight_sync`` push, the ``logprob`` stage and the ``policy_update`` stage.

:func:`trajkit.rl.step.rl_step` runs its last two stages through a :class:`Learner`, so the same step drives
the policy in this process (:class:`LocalLearner`, the default) or in a Ray actor (the policy worker of
:mod:`trajkit.cluster`, which holds a :class:`LocalLearner` over its own :class:`PolicySide`). The controller
sends the collated batch; the learner keeps what the update needs (the recomputed old and reference
log-probs, the policy's distributions for draft distillation) between the two calls, and sends back only
metrics. With ``distill.teacher`` the side also holds the frozen teacher, which scores the batch in the
``logprob`` stage beside the policy (:mod:`trajkit.rl.distill`): wherever the policy runs, its teacher runs.

    side = build_policy_side(cfg, tokenizer)     # policy, optimiser, reference, teacher, draft (+ optimiser)
    learner = LocalLearner(side)
    learner.push_weights(rollout)                # weight_sync: policy (and draft) -> the rollout backend
    gap = learner.logprobs(batch, step)          # logprob: mismatch/* between engine and policy log-probs
                                                 # (and the teacher's log-probs -> per-token advantages)
    metrics = learner.update(step)               # policy_update: loss, backward, optimiser step, distillation
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

from trajkit.rl.batching import Batch, batch_logprobs
from trajkit.models.logprobs import check_chunkable
from trajkit.rl.build import build_models, frozen_copy
from trajkit.rl.config import TrainConfig
from trajkit.rl.distill import load_teacher, score_with_teacher
from trajkit.rl.mismatch import mismatch_metrics
from trajkit.rl.precision import DTYPES, grad_scaler, model_device
from trajkit.rl.update import (
    correction_needs_old,
    distill_draft,
    distill_eagle,
    make_optimizer,
    set_lr,
    slices_of,
    update_policy,
)


class Learner(Protocol):
    def push_weights(self, rollout) -> None:
        """The ``weight_sync`` stage: the policy's (and a trained draft's) weights into ``rollout``'s backend."""

    def logprobs(self, batch: Batch, step: int) -> dict | None:
        """Recompute the policy's (and the reference's) log-probs on ``batch`` (collated on the CPU) at step
        ``step`` (0-based); -> the engine/policy gap (:func:`trajkit.rl.mismatch.mismatch_metrics`), or None
        when the update's own forward gives the old log-probs (:func:`reuses_update_forward`): the gap then
        comes in :meth:`update`'s metrics as ``mismatch/*``."""

    def update(self, step: int) -> dict:
        """The update on the batch of the last :meth:`logprobs`; -> the ``loss/*``, ``optim/*``, ``draft/*``
        metrics (and ``distill/*``, ``time/logprob/teacher`` of that :meth:`logprobs` with a teacher)."""


@dataclass
class PolicySide:
    """The policy side of a run, wherever it lives (this process, a Ray policy worker, one rank of a sharded
    run): the policy (float32 master weights; a rank's shard under ``policy.fsdp``), its optimiser, the frozen
    reference (when ``loss.kl_coef > 0``), the draft and its optimiser (when distilled), the float16 loss
    scaler, the frozen teacher of on-policy distillation (when ``distill.teacher`` is set)."""

    cfg: TrainConfig
    policy: torch.nn.Module
    optimizer: torch.optim.Optimizer
    draft: torch.nn.Module | None = None
    draft_optimizer: torch.optim.Optimizer | None = None
    reference: torch.nn.Module | None = None
    grad_scaler: Any = None
    teacher: torch.nn.Module | None = None


def build_policy_side(cfg: TrainConfig, tokenizer, policy=None) -> PolicySide:
    """The policy side of a run built from ``cfg`` (``policy``: a given module instead of the configured one)."""
    policy, draft = build_models(cfg, tokenizer, policy)
    distill = cfg.draft.distill and draft is not None
    return PolicySide(
        cfg=cfg, policy=policy, optimizer=make_optimizer(policy, cfg), draft=draft,
        draft_optimizer=make_optimizer(draft, cfg, lr=cfg.draft.distill_lr, name="adamw") if distill else None,
        reference=frozen_copy(policy) if cfg.loss.kl_coef > 0 else None,
        grad_scaler=grad_scaler(model_device(policy), DTYPES[cfg.policy.dtype]),
        teacher=_teacher(cfg, tokenizer, policy))


def _teacher(cfg: TrainConfig, tokenizer, policy) -> torch.nn.Module | None:
    """The frozen teacher of ``distill.teacher`` on the policy's device, or None."""
    if cfg.distill.teacher is None:
        return None
    teacher = load_teacher(cfg.distill.teacher, tokenizer, model_device(policy))
    if cfg.optim.logits_chunk:
        check_chunkable(teacher)
    return teacher


def distill_due(side, step: int) -> bool:
    """Whether step ``step`` (0-based) distils the draft (every ``draft.distill_every``-th step)."""
    return side.draft_optimizer is not None and (step + 1) % side.cfg.draft.distill_every == 0


def reuses_update_forward(side, rows: int, step: int) -> bool:
    """Whether step ``step``'s update of ``rows`` rows scores its own old log-probs, skipping the ``logprob``
    stage's forward: the update is one optimiser step (one slice, one pass), so the weights its forward
    runs on are exactly the old policy's, and nothing needs the old log-probs before the update (no draft
    distillation this step, which needs that forward's distributions; no teacher; no loss correction).
    See :func:`trajkit.rl.update.update_policy` (``on_policy``); TRL skips the same forward at
    ``num_iterations=1`` with aligned generation and optimiser steps."""
    cfg = side.cfg
    return (len(slices_of(rows, cfg)) == 1 and not distill_due(side, step)
            and side.teacher is None and not correction_needs_old(cfg))


class LocalLearner:
    """The learner over ``side``, a :class:`PolicySide` (read at each call)."""

    def __init__(self, side):
        self.side = side
        self._last: tuple | None = None  # (batch on the device, old_logp, ref_logp, dists, features, metrics)

    def weights(self) -> dict:
        """``{"policy": state dict, "draft": state dict or None}`` (the live tensors, not copies)."""
        s = self.side
        return {"policy": s.policy.state_dict(), "draft": s.draft.state_dict() if s.draft is not None else None}

    def push_weights(self, rollout) -> None:
        rollout.sync(self.side.policy, self.side.draft)

    def logprobs(self, batch: Batch, step: int) -> dict:
        s, cfg = self.side, self.side.cfg
        dtype = DTYPES[cfg.policy.dtype]
        batch = batch.to(model_device(s.policy))
        if reuses_update_forward(s, batch.input_ids.shape[0], step):
            self._last = (batch, None, self._reference_logprobs(batch), None, None, {})
            return None
        distill = distill_due(s, step)
        # an EAGLE head learns from this same forward's hidden states (no extra policy forward)
        layers = getattr(s.draft, "layers", None) if distill and cfg.draft.kind == "eagle" else None
        old_logp, dists, *feats = batch_logprobs(s.policy, batch, cfg.rollout.temperature,
                                                 cfg.optim.micro_batch_size, keep_dists=distill, dtype=dtype,
                                                 logits_chunk=cfg.optim.logits_chunk, feature_layers=layers)
        ref_logp = self._reference_logprobs(batch)
        extra = {}
        if s.teacher is not None:  # the batch's advantages become per token [B, L-1]
            batch, extra = score_with_teacher(s.teacher, batch, old_logp, cfg)
        self._last = (batch, old_logp, ref_logp, dists, feats[0] if feats else None, extra)
        return mismatch_metrics(batch.engine_logp, old_logp, batch.mask)

    def _reference_logprobs(self, batch: Batch) -> torch.Tensor | None:
        """The frozen reference's log-probs ``[B, L-1]`` on ``batch`` (None without a KL term)."""
        s, cfg = self.side, self.side.cfg
        if s.reference is None:
            return None
        ref_logp, _ = batch_logprobs(s.reference, batch, cfg.rollout.temperature, cfg.optim.micro_batch_size,
                                     dtype=DTYPES[cfg.policy.dtype], logits_chunk=cfg.optim.logits_chunk)
        return ref_logp

    def update(self, step: int) -> dict:
        if self._last is None:
            raise RuntimeError("Learner.update before Learner.logprobs: the update needs this step's log-probs")
        s, cfg = self.side, self.side.cfg
        batch, old_logp, ref_logp, dists, feats, metrics = self._last
        self._last = None
        if cfg.optim.lr_schedule != "constant" or cfg.optim.warmup_steps:
            metrics["optim/lr_factor"] = set_lr(s.optimizer, cfg, step)
        on_policy = old_logp is None
        if on_policy:  # filled in by the update's own forward (reuses_update_forward)
            old_logp = torch.zeros(batch.mask.shape, device=batch.mask.device)
        metrics.update(update_policy(s.policy, s.optimizer, batch, old_logp, ref_logp, cfg, s.grad_scaler,
                                     on_policy=on_policy))
        if on_policy:
            gap = mismatch_metrics(batch.engine_logp, old_logp, batch.mask)
            metrics.update({f"mismatch/{k}": v for k, v in gap.items()})
        if feats is not None:
            metrics.update(distill_eagle(s.draft, s.draft_optimizer, batch, dists, feats, cfg))
        elif dists is not None:
            metrics.update(distill_draft(s.draft, s.draft_optimizer, batch, dists, cfg))
        return metrics
