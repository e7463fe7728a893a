"""The ``policy_update`` stage: micro-batched loss and backward, clipped AdamW step; draft distillation.

Each of ``minibatches`` optimiser steps sees a slice of the step's rows; its loss is accumulated over
micro-batches with the *slice's* counts in :class:`LossNorm`, so the accumulated gradient equals the
gradient of the slice's full loss. The old log-probs are the ones recomputed in the ``logprob`` stage.
``optim.num_iterations`` (GRPO's mu, TRL's ``num_iterations``) repeats the pass over the slices; from the
second pass on the policy has moved, so the ratio to the old log-probs leaves 1 and the clip acts.
With ``loss.tis`` each token's policy-gradient term is weighted by ``min(exp(old - engine), tis_cap)``
(:func:`trajkit.rl.losses.truncated_is_weights`), computed once per step from the recorded engine
log-probs; with ``loss.decoupled`` by AReaL's uncapped behaviour weight ``exp(old - engine)``
(:func:`trajkit.rl.losses.decoupled_weights`), ``old`` being the proximal policy; a token or sequence mask
(``loss.token_mask``, ``loss.seq_mask``) zeroes those weights first (:mod:`trajkit.rl.correction`). With
``loss.echo_coef`` ECHO's cross-entropy on the forced completion tokens is added (:mod:`trajkit.rl.echo`).
Forwards run under autocast in ``policy.dtype``; float16 scales the loss with a GradScaler (unscaled before
the gradient clip).

A row whose advantages are all zero (every row of a GRPO group whose rewards agree) adds exactly nothing to
the gradient when the loss has no other term (no KL to a reference, no distillation, no ECHO): its
surrogate is ``A * ratio``. Such rows form their own micro-batches, scored without a graph (their metrics
and on-policy old log-probs are still written) and never backed; the slice's counts in :class:`LossNorm`
keep them, so the gradient is the one every row backed would give (to float32 summation order: the other
rows' micro-batches are grouped without them). TRL and the step before this back every row. Off under
FSDP2 (every rank must run the same forwards) and when no row is idle; a slice of idle rows only gets zero
gradients, as a backward of its zero loss would give, so AdamW still applies its momentum and decay.

Draft distillation (NeMo RL does this for EAGLE-3 drafts): on the fresh rollouts, minimise the soft
cross-entropy ``-sum_v p(v) log q(v)`` between the detached policy distribution ``p`` (from the
``logprob`` stage, at the rollout temperature) and the draft's ``q`` at the same temperature, over sampled
completion positions. Both are tempered because the speculative acceptance test compares tempered p, q.
"""
from __future__ import annotations

import contextlib
import math

import torch

from trajkit.models.fit import soft_cross_entropy
from trajkit.optim.build import OPTIMIZERS  # noqa: F401 (the registry's older import path, kept)
from trajkit.rl.batching import Batch, chunks, forward_logits, row_chunks, token_logprobs, token_logprobs_and_dists
from trajkit.rl.config import TrainConfig
from trajkit.rl.correction import correction_weights, masking
from trajkit.rl.divergence import common_support, token_divergence
from trajkit.rl.echo import echo_loss, observation_mask
from trajkit.rl.losses import LOSSES, LossNorm, policy_loss
from trajkit.rl.precision import DTYPES


def make_optimizer(model, cfg: TrainConfig, lr: float | None = None, name: str | None = None) -> torch.optim.Optimizer:
    """The ``optim.name`` optimiser (or ``name``) over ``model`` (LoGRA installs its sketch hooks on it)."""
    o = cfg.optim
    return OPTIMIZERS[name or o.name](model, o, o.lr if lr is None else lr)


def lr_factor(schedule: str, warmup: int, step: int, total: int) -> float:
    """The learning-rate multiplier of RL step ``step`` (0-based) of ``total``: linear warm-up from 0 over
    ``warmup`` steps, then ``constant`` 1, ``linear`` decay to 0, or ``cosine`` decay to 0 (the schedules of
    ``transformers.get_scheduler``, evaluated per step).

    >>> [lr_factor("linear", 0, s, 4) for s in range(4)]
    [1.0, 0.75, 0.5, 0.25]
    """
    if step < warmup:
        return step / max(1, warmup)
    if schedule == "constant":
        return 1.0
    progress = (step - warmup) / max(1, total - warmup)
    if schedule == "linear":
        return max(0.0, 1.0 - progress)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def set_lr(optimizer, cfg: TrainConfig, step: int) -> float:
    """Every parameter group's rate = its initial rate x :func:`lr_factor` of ``step``; -> the factor. The
    initial rate is kept in the group (``initial_lr``, as torch's schedulers do), so the schedule is a pure
    function of the step counter and a resumed run continues it exactly."""
    o = cfg.optim
    factor = lr_factor(o.lr_schedule, o.warmup_steps, step, cfg.steps)
    for group in optimizer.param_groups:
        group.setdefault("initial_lr", group["lr"])
        group["lr"] = group["initial_lr"] * factor
    return factor


def _step(optimizer, policy, batch: Batch, rows: torch.Tensor, cfg: TrainConfig) -> None:
    """``optimizer.step()``; a KL-budgeted LoGRA also gets the slice's tempered logits to measure KL on."""
    if getattr(optimizer, "kl_budget", None) is None:
        optimizer.step()
        return

    def kl_forward():
        for part in chunks(len(rows), cfg.optim.micro_batch_size):
            mb = batch.select(rows[part])
            yield forward_logits(policy, mb) / cfg.rollout.temperature, mb.mask
    optimizer.step(kl_forward=kl_forward)


def _accumulate(policy, batch: Batch, rows: torch.Tensor, old_logp, ref_logp, weights, cfg: TrainConfig,
                scaler=None, shard=None, obs=None, on_policy: bool = False) -> dict:
    """Backward the loss of ``rows`` (one optimiser step's slice) micro-batch by micro-batch; with ``shard``
    (:class:`trajkit.rl.fsdp.Shard`) only this rank's block of them, normalised by the whole slice's counts,
    and the stats summed over the ranks. ``obs: [B, L-1]``: ECHO's observation tokens (None: ECHO off).
    ``on_policy``: each micro-batch's old log-probs are its own detached log-probs, written into
    ``old_logp`` before the loss reads them (see :func:`update_policy`)."""
    norm = LossNorm(num_seqs=len(rows), num_tokens=int(batch.mask[rows].sum()),
                    max_tokens=cfg.rollout.max_new_tokens)
    num_obs = int(obs[rows].sum()) if obs is not None else 0
    dtype = DTYPES[cfg.policy.dtype]
    totals: dict[str, float] = {}
    own = shard.rows(rows) if shard is not None else rows
    idle = idle_rows(batch, cfg, obs, shard)
    backed = 0
    for idx, no_gradient in micro_batches(policy, batch, own, cfg.optim.micro_batch_size, idle):
        mb = batch.select(idx)
        width = mb.input_ids.shape[1] - 1
        with torch.no_grad() if no_gradient else contextlib.nullcontext():
            if mb.teacher_dists is None:
                logp = token_logprobs(policy, mb, cfg.rollout.temperature, dtype, cfg.optim.logits_chunk)
            else:
                logp, student = token_logprobs_and_dists(policy, mb, cfg.rollout.temperature, dtype)
            if on_policy:
                old_logp[idx, :width] = logp.detach()
            ref = ref_logp[idx, :width] if ref_logp is not None else None
            w = weights[idx, :width] if weights is not None else None
            loss, stats = policy_loss(cfg.loss.name, logp, old_logp[idx, :width], mb.advantages, mb.mask, norm,
                                      cfg.loss.clip_low, cfg.loss.clip_high, ref, cfg.loss.kl_coef, tis_weights=w,
                                      kl_ratio=cfg.loss.kl_ratio)
            if mb.teacher_dists is not None:
                term = _divergence_term(cfg, logp, student, mb, norm, w)
                loss = loss + cfg.distill.coef * term
                stats["distill"] = float(term.detach())
            if obs is not None:
                echo = echo_loss(logp, obs[idx, :width], num_obs)
                loss = loss + cfg.loss.echo_coef * echo
                stats["echo"] = float(echo.detach())
        if not no_gradient:
            (scaler.scale(loss) if scaler is not None else loss).backward()
            backed += 1
        for key, value in stats.items():
            totals[key] = totals.get(key, 0.0) + value
    if not backed and idle is not None:
        _zero_gradients(policy)
    if shard is not None:
        totals = shard.sum(totals)
    totals["tokens"] = norm.num_tokens
    return totals


def idle_rows(batch: Batch, cfg: TrainConfig, obs, shard) -> torch.Tensor | None:
    """``[B]`` bool: the rows whose loss has no gradient (all advantages zero, and no KL, distillation or
    ECHO term; module docstring), or None where none is or the skip does not apply (FSDP2: ``shard``)."""
    if shard is not None or obs is not None or batch.teacher_dists is not None or cfg.loss.kl_coef > 0:
        return None
    adv = batch.advantages
    idle = adv == 0 if adv.dim() == 1 else (adv == 0).all(1)
    return idle if bool(idle.any()) else None


def micro_batches(policy, batch: Batch, rows: torch.Tensor, size: int,
                  idle: torch.Tensor | None) -> list[tuple[torch.Tensor, bool]]:
    """``rows`` in micro-batches (:func:`~trajkit.rl.batching.row_chunks`), each with whether it is all ``idle``
    rows (scored without a graph, not backed): the others first, then the idle ones."""
    if idle is None:
        return [(idx, False) for idx in row_chunks(policy, batch, rows, size)]
    still = idle[rows]
    return [(idx, False) for idx in row_chunks(policy, batch, rows[~still], size)] + \
        [(idx, True) for idx in row_chunks(policy, batch, rows[still], size)]


def _zero_gradients(policy) -> None:
    """Zero gradients on every trainable parameter without one: what backing a zero loss leaves."""
    for p in policy.parameters():
        if p.requires_grad and p.grad is None:
            p.grad = torch.zeros_like(p)


def _divergence_term(cfg: TrainConfig, logp: torch.Tensor, student: torch.Tensor, mb: Batch,
                     norm: LossNorm, weights: torch.Tensor | None) -> torch.Tensor:
    """On-policy distillation's whole-vocabulary term (``distill.divergence``): the divergence at each sampled
    position of ``mb`` (``student``: the policy's log-distributions there, ``[N, V]``, with its graph), placed
    at those positions and aggregated over the slice as ``loss.name`` aggregates its tokens (as the KL to the
    reference is), so micro-batches sum to the slice's term. A token the loss correction removed (weight 0:
    ``loss.token_mask``, ``loss.seq_mask``, ``loss.decoupled_cap``) is out of it too, keeping its place in the
    counts; the correction's weights do not scale it (the divergence is exact at each position, no sample)."""
    mask = mb.mask > 0
    div = token_divergence(cfg.distill.divergence, *common_support(student, mb.teacher_dists))
    per_token = torch.zeros(logp.shape, dtype=div.dtype, device=div.device).masked_scatter(mask, div)
    if weights is not None:
        per_token = per_token * (weights > 0).to(div.dtype)
    return LOSSES[cfg.loss.name].aggregate(per_token, mb.mask.to(div.dtype), norm)


def slices_of(b: int, cfg: TrainConfig) -> list[torch.Tensor]:
    """The rows of each optimiser step of the update of ``b`` rows, in order: ``optim.num_iterations``
    passes over up to ``optim.minibatches`` consecutive slices (5 rows in 4 minibatches: 2, 2, 1)."""
    per_step = -(-b // cfg.optim.minibatches)
    return chunks(b, per_step) * cfg.optim.num_iterations


def update_policy(policy, optimizer, batch: Batch, old_logp: torch.Tensor, ref_logp: torch.Tensor | None,
                  cfg: TrainConfig, scaler=None, shard=None, on_policy: bool = False) -> dict:
    """``old_logp, ref_logp: [B, L-1]``; runs ``cfg.optim.num_iterations`` passes of up to
    ``cfg.optim.minibatches`` optimiser steps (fewer when the rows do not fill them: 5 rows in 4 minibatches
    make 3 slices of 2, 2, 1) -> metrics averaged over the steps that ran. ``scaler``: a
    ``torch.amp.GradScaler`` for float16, else None. ``shard`` (:class:`trajkit.rl.fsdp.Shard`): this rank
    backs its block of each slice (``ref_logp`` need only be filled there) and the metrics are the ranks'.

    ``on_policy``: the update is one optimiser step (one slice, one pass), so the policy that scores the
    batch *is* the old policy: its old log-probs are the step's own forward, detached (ratio exactly 1),
    and the ``logprob`` stage's separate no-grad forward is skipped (TRL's ``old_per_token_logps=None``
    at ``num_iterations=1``). ``old_logp`` is then a zero ``[B, L-1]`` tensor that this fills in, for the
    caller's mismatch metrics; the correction weights (TIS, decoupled, masks) need the old log-probs
    before the update, so they must be off."""
    b = batch.input_ids.shape[0]
    slices = slices_of(b, cfg)
    n_steps = len(slices)
    if on_policy and (n_steps != 1 or shard is not None or correction_needs_old(cfg)):
        raise ValueError("update_policy(on_policy=True) needs one optimiser step (optim.minibatches=1, "
                         "optim.num_iterations=1), no shard and no loss correction (tis, decoupled, masks)")
    metrics: dict[str, float] = {"loss/pg": 0.0, "loss/grad_norm": 0.0, "loss/clip_frac": 0.0, "loss/ratio": 0.0}
    weights, correction = (None, {}) if on_policy else \
        correction_weights(cfg.loss, old_logp, batch.engine_logp, batch.mask)
    metrics.update(correction)
    obs = observation_mask(batch.mask, batch.lengths) if cfg.loss.echo_coef > 0 else None
    tokens = 0
    for rows in slices:
        optimizer.zero_grad(set_to_none=True)
        totals = _accumulate(policy, batch, rows, old_logp, ref_logp, weights, cfg, scaler, shard, obs, on_policy)
        if scaler is not None:
            scaler.unscale_(optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.optim.grad_clip)
        if scaler is not None:
            scaler.step(optimizer)  # skipped (and the scale lowered) when a gradient overflowed
            scaler.update()
        else:
            _step(optimizer, policy, batch, rows, cfg)
        metrics["loss/pg"] += totals["pg_loss"] / n_steps
        metrics["loss/grad_norm"] += float(grad_norm) / n_steps
        metrics["loss/clip_frac"] += totals.get("clip_tokens", totals.get("clip_seqs", 0.0))
        metrics["loss/ratio"] += totals["ratio_sum"]
        if "echo" in totals:
            metrics["loss/echo"] = metrics.get("loss/echo", 0.0) + totals["echo"] / n_steps
        if "distill" in totals:
            metrics["loss/distill"] = metrics.get("loss/distill", 0.0) + totals["distill"] / n_steps
        if "kl_ref" in totals:
            metrics["loss/kl_ref"] = metrics.get("loss/kl_ref", 0.0) + totals["kl_ref"] / n_steps
        tokens += totals["tokens"]
        if getattr(optimizer, "kl_budget", None) is not None:
            metrics["optim/kl_pred"] = metrics.get("optim/kl_pred", 0.0) + optimizer.last["predicted_kl"] / n_steps
            metrics["optim/kl_scale"] = metrics.get("optim/kl_scale", 0.0) + optimizer.last["scale"] / n_steps
    denom = b * cfg.optim.num_iterations if cfg.loss.name == "gspo" else max(tokens, 1)
    metrics["loss/clip_frac"] /= denom
    metrics["loss/ratio"] /= denom
    return metrics


def correction_needs_old(cfg: TrainConfig) -> bool:
    """Whether the loss weights tokens by the old log-probs before the update (TIS, decoupled, masks)."""
    return bool(cfg.loss.tis or cfg.loss.decoupled or masking(cfg.loss))


def distill_eagle(head, optimizer, batch: Batch, target_logp: torch.Tensor, features: torch.Tensor,
                  cfg: TrainConfig, ttt_steps: int = 2) -> dict:
    """``cfg.draft.distill_steps`` passes of an EAGLE head's training-time-test loss on the rollouts, from the
    policy's own forward of the ``logprob`` stage: ``features: [B, L, F]`` its hidden states at the head's
    layers, ``target_logp: [B, L-1, V]`` its detached distributions. The head's entry ``t`` (the feature of
    token ``t - 1``, the embedding of token ``t``) predicts token ``t + 1``: its teacher is ``target_logp[:, t]``
    (the shift by one), restricted to the head's shortlist; step ``j`` of the test starts ``j`` entries late."""
    def loss_of(rows: torch.Tensor, mb: Batch) -> torch.Tensor:
        length = mb.input_ids.shape[1] - 1  # entries 0..L-2 have a teacher
        feats = features[rows, :length]
        raw = torch.cat([torch.zeros_like(feats[:, :1]), feats[:, :-1]], dim=1)
        positions = torch.arange(length, device=raw.device).expand(len(rows), -1)
        teacher = target_logp[rows, :length][..., head.ids].exp()
        loss = 0.0
        for j, hidden in enumerate(head.unroll(raw, mb.input_ids[:, :length], positions, ttt_steps)):
            log_q = torch.log_softmax(head.local_logits(hidden).float() / cfg.rollout.temperature, dim=-1)
            mask = mb.mask.clone()
            mask[:, :j] = 0
            loss = loss + (-(teacher * log_q).sum(-1) * mask).sum() / mask.sum().clamp(min=1)
        return loss / ttt_steps

    return _distill(head, optimizer, batch, cfg, loss_of)


def distill_draft(draft, optimizer, batch: Batch, target_logp: torch.Tensor, cfg: TrainConfig) -> dict:
    """``cfg.draft.distill_steps`` passes of soft cross-entropy to ``target_logp: [B, L-1, V]``."""
    def loss_of(rows: torch.Tensor, mb: Batch) -> torch.Tensor:
        teacher = target_logp[rows, :mb.input_ids.shape[1] - 1]
        if hasattr(draft, "local_logits"):  # a shortlist draft learns p restricted to its shortlist
            student = draft.local_logits(mb.input_ids, attention_mask=mb.attention)[:, :-1].float()
            teacher = draft.teacher_logp(teacher)
        else:
            student = forward_logits(draft, mb)
        return soft_cross_entropy(student, teacher, mb.mask, cfg.rollout.temperature)

    return _distill(draft, optimizer, batch, cfg, loss_of)


def _distill(net, optimizer, batch: Batch, cfg: TrainConfig, loss_of) -> dict:
    """``cfg.draft.distill_steps`` optimiser steps on ``net``, each over every micro-batch of ``batch``: the
    micro-batch's ``loss_of(rows, mb)`` weighted by its share of the batch's trained tokens."""
    losses = []
    for _ in range(cfg.draft.distill_steps):
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for rows in chunks(batch.input_ids.shape[0], cfg.optim.micro_batch_size):
            mb = batch.select(rows)
            weight = float(mb.mask.sum()) / max(float(batch.mask.sum()), 1.0)
            loss = loss_of(rows, mb) * weight
            loss.backward()
            total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.optim.grad_clip)
        optimizer.step()
        losses.append(total)
    return {"draft/distill_ce": losses[-1]}
