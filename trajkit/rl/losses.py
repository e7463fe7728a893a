"""Policy-gradient losses of the GRPO family, as a registry of pure tensor functions.

Every loss sees the same tensors: ``logp`` (current policy, with grad), ``old_logp`` (the policy that
produced the batch's advantages, detached; recomputed in the ``logprob`` stage), per-sequence
``advantages``, the ``mask`` of sampled tokens, and a :class:`LossNorm` with the *whole batch's* counts,
so summing a loss over micro-batches gives exactly the full-batch loss (gradient accumulation is exact).

With ``ratio = exp(logp - old_logp)`` and ``A`` the sequence's advantage, the token surrogate is
``-min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A)`` and the losses differ in how they
aggregate it:

- ``grpo`` (Shao et al. 2024): mean over each sequence's tokens, then mean over sequences.
- ``dapo`` (Yu et al. 2025): token-level, i.e. sum over every sampled token of the batch divided by the
  batch's token count; "clip-higher" is its default asymmetric clip (0.2, 0.28).
- ``dr_grpo`` (Liu et al. 2025): sum over each sequence's tokens divided by a constant (the generation
  budget ``max_tokens``), then mean over sequences; pair it with ``loss.scale_rewards=none`` advantages.
- ``gspo`` (Zheng et al. 2025): one importance ratio per sequence,
  ``s = exp(mean_t(logp - old_logp))``, clipped with the paper's small range (3e-4, 4e-4).

The optional KL penalty to a reference policy uses the k3 estimator (Schulman 2020),
``exp(ref - logp) - (ref - logp) - 1`` per token, aggregated the same way as the loss (sequence mean for
``gspo``) and added with weight ``kl_coef``. With ``kl_ratio`` (TRL's ``use_bias_correction_kl``, the
DeepSeek-V3.2 report's unbiased estimator) each token's k3 term is multiplied by the (differentiable)
importance ratio, the sequence ratio for ``gspo``, which changes the KL gradient even at ratio 1. Deviation: GSPO's token variant is not here; DAPO's dynamic
sampling lives in the generation stage (:mod:`trajkit.rl.dynamic`), not in the loss.

The token losses also take per-token advantages ``[B, T]`` (on-policy distillation's reverse KL,
:mod:`trajkit.rl.distill`) in place of ``A``; GSPO's sequence ratio takes only ``[B]``.

Truncated importance sampling (TIS, Yao et al. 2025, "Your efficient RL framework secretly brings you
off-policy RL training"): the rollouts were sampled by the *engine* (``q``, its log-probs recorded in
each sample), while ``old_logp`` is the trainer's recomputation (``pi_old``); a different kernel, dtype
or a stale sync makes them differ, so the "on-policy" gradient is off-policy. TIS multiplies each token's
policy-gradient term by the detached weight ``w = min(exp(old_logp - rollout_logp), C)``
(:func:`truncated_is_weights`); the cap ``C`` bounds the variance. The KL term is not reweighted: TIS
corrects the policy-gradient estimator only. Only the token-level losses take per-token weights (``LossSpec.token_weights``);
GSPO's one-ratio-per-sequence loss takes one weight per sequence (``LossSpec.sequence_weights``: the
sequence mask of :mod:`trajkit.rl.correction`), never per-token ones.

The decoupled objective (Fu et al. 2025, AReaL, "decoupled PPO"), for asynchronous rollouts whose tokens
were sampled by older (and, within one episode, several) policy versions: three policies, the behaviour
``pi_behav`` (the engine's recorded log-probs, each token under the version that sampled it), the
*proximal* ``pi_prox`` (the policy at the start of the update: trajkit's recomputed ``old_logp``) and the
trained ``pi_theta``. The token term is ``-(pi_prox / pi_behav) * min(r A, clip(r, 1 - lo, 1 + hi) A)``
with ``r = pi_theta / pi_prox``: the importance weight corrects behaviour -> proximal, the clip (the trust
region) is taken around the proximal policy, not the stale behaviour one. It is the same surrogate as TIS
with the weight not truncated; with ``cap`` a token whose weight exceeds it is left out
(:func:`decoupled_weights`). Deviation: AReaL removes such a token from the loss mask (and the token
count); trajkit gives it weight 0 and keeps the batch's counts, so micro-batches still sum exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class LossNorm:
    """Counts over the whole optimiser batch: sequences, sampled tokens, and the generation budget."""

    num_seqs: int
    num_tokens: int
    max_tokens: int


Aggregate = Callable[[torch.Tensor, torch.Tensor, LossNorm], torch.Tensor]


def seq_mean_token_mean(x: torch.Tensor, mask: torch.Tensor, norm: LossNorm) -> torch.Tensor:
    """``x, mask: [B, T]`` -> sum_b mean_t x[b] / num_seqs."""
    per_seq = (x * mask).sum(1) / mask.sum(1).clamp(min=1)
    return per_seq.sum() / norm.num_seqs


def token_mean(x: torch.Tensor, mask: torch.Tensor, norm: LossNorm) -> torch.Tensor:
    """``x, mask: [B, T]`` -> sum of every masked token / num_tokens of the batch."""
    return (x * mask).sum() / max(norm.num_tokens, 1)


def seq_sum_constant(x: torch.Tensor, mask: torch.Tensor, norm: LossNorm) -> torch.Tensor:
    """``x, mask: [B, T]`` -> sum_b sum_t x[b] / (max_tokens * num_seqs) (Dr.GRPO)."""
    return (x * mask).sum() / (norm.max_tokens * norm.num_seqs)


def _check(logp, old_logp, advantages, mask, per_token: bool = False) -> None:
    """``logp, old_logp, mask: [B, T]``; ``advantages: [B]``, or also ``[B, T]`` when ``per_token``."""
    assert logp.dim() == 2 and logp.shape == old_logp.shape == mask.shape, \
        f"logp/old_logp/mask must be [B, T]: {tuple(logp.shape)} {tuple(old_logp.shape)} {tuple(mask.shape)}"
    shapes = (logp.shape[:1], logp.shape) if per_token else (logp.shape[:1],)
    assert advantages.shape in shapes, \
        f"advantages must be {' or '.join(str(list(s)) for s in shapes)}, got {tuple(advantages.shape)}"


def clipped_surrogate(ratio: torch.Tensor, advantages: torch.Tensor, low: float, high: float):
    """PPO's clipped objective to minimise, element-wise: ``-min(ratio A, clip(ratio, low, high) A)`` with
    absolute bounds (GRPO's ``1 - clip_low``, ``1 + clip_high``; Tinker's ``clip_low_threshold``,
    ``clip_high_threshold``), and where the clip acts (``clipped < unclipped``). The one home of the surrogate:
    every token loss here, GSPO's sequence ratio and the Tinker server's ``ppo``/``gspo`` call it.

    >>> loss, active = clipped_surrogate(torch.tensor([0.5, 1.0, 1.5]), torch.tensor([1.0, 1.0, 1.0]), 0.8, 1.2)
    >>> loss.tolist(), active.tolist()
    ([-0.5, -1.0, -1.2000000476837158], [False, False, True])
    """
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, low, high) * advantages
    return -torch.minimum(unclipped, clipped), clipped < unclipped


def _token_surrogate(logp, old_logp, advantages, mask, clip_low, clip_high):
    """Per-token clipped surrogate ``[B, T]`` (to minimise) and the clip indicator ``[B, T]``; ``advantages``
    ``[B]`` (one per sequence, broadcast over its tokens) or ``[B, T]`` (per token: on-policy distillation)."""
    ratio = torch.exp(logp - old_logp)
    per_token_adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    per_token, active = clipped_surrogate(ratio, per_token_adv, 1.0 - clip_low, 1.0 + clip_high)
    return per_token, active.float() * mask, ratio


def _token_loss(aggregate: Aggregate):
    def loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
             norm: LossNorm, clip_low: float, clip_high: float, weights: torch.Tensor | None = None):
        """``logp, old_logp, mask: [B, T]``, ``advantages: [B]`` or per token ``[B, T]``, optional detached
        per-token ``weights: [B, T]`` (TIS) multiplying the surrogate -> (scalar loss, metrics)."""
        _check(logp, old_logp, advantages, mask, per_token=True)
        mask = mask.to(logp.dtype)
        per_token, clip_active, ratio = _token_surrogate(logp, old_logp, advantages, mask, clip_low, clip_high)
        if weights is not None:
            assert weights.shape == logp.shape, f"weights must be [B, T] like logp, got {tuple(weights.shape)}"
            per_token = per_token * weights.detach().to(logp.dtype)
        stats = {"clip_tokens": float(clip_active.sum()), "ratio_sum": float((ratio.detach() * mask).sum())}
        return aggregate(per_token, mask, norm), stats
    return loss


def gspo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
              norm: LossNorm, clip_low: float, clip_high: float, weights: torch.Tensor | None = None):
    """Sequence-level ratio ``s[b] = exp(mean_t (logp - old_logp))``; ``-min(s A, clip(s) A)`` averaged
    over the batch's sequences. ``weights: [B, T]`` (a sequence mask, :mod:`trajkit.rl.correction`) must be
    one value per row on its sampled tokens; it multiplies the row's term."""
    _check(logp, old_logp, advantages, mask)
    mask = mask.to(logp.dtype)
    log_s = ((logp - old_logp) * mask).sum(1) / mask.sum(1).clamp(min=1)  # [B]
    s = torch.exp(log_s)
    per_seq, active = clipped_surrogate(s, advantages, 1.0 - clip_low, 1.0 + clip_high)
    if weights is not None:
        per_seq = per_seq * _row_weight(weights.detach().to(logp.dtype), mask)
    stats = {"clip_seqs": float(active.float().sum()), "ratio_sum": float(s.detach().sum())}
    return per_seq.sum() / norm.num_seqs, stats


def _row_weight(weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``weights, mask: [B, T]`` -> ``[B]``, the one weight of each row's sampled tokens (1 for a row with none);
    per-token weights that differ within a row are refused: they need a token-level loss."""
    sampled = mask.bool()
    low = torch.where(sampled, weights, torch.full_like(weights, math.inf)).amin(1)
    high = torch.where(sampled, weights, torch.full_like(weights, -math.inf)).amax(1)
    some = sampled.any(1)
    if not torch.equal(low[some], high[some]):
        raise ValueError("gspo takes one weight per sequence (a sequence mask); per-token importance weights "
                         "(TIS) need a token-level loss")
    return torch.where(some, low, torch.ones_like(low))


@dataclass(frozen=True)
class LossSpec:
    """A registered loss: the function, how its KL term aggregates, its paper's clip range, and whether it
    takes per-token importance weights (``weights=`` keyword; needed by ``loss.tis``) or, ``sequence_weights``,
    one weight per sequence (a sequence mask)."""

    fn: Callable
    aggregate: Aggregate
    clip_low: float
    clip_high: float
    token_weights: bool = False
    sequence_ratio: bool = False
    sequence_weights: bool = False


LOSSES: dict[str, LossSpec] = {
    "grpo": LossSpec(_token_loss(seq_mean_token_mean), seq_mean_token_mean, 0.2, 0.2, token_weights=True),
    "dapo": LossSpec(_token_loss(token_mean), token_mean, 0.2, 0.28, token_weights=True),
    "dr_grpo": LossSpec(_token_loss(seq_sum_constant), seq_sum_constant, 0.2, 0.2, token_weights=True),
    "gspo": LossSpec(gspo_loss, seq_mean_token_mean, 3e-4, 4e-4, sequence_ratio=True, sequence_weights=True),
}


def truncated_is_weights(old_logp: torch.Tensor, rollout_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """TIS weights ``min(exp(old_logp - rollout_logp), cap)`` ``[B, T]``, detached.

    ``old_logp``: the trainer's recomputed log-probs; ``rollout_logp``: the engine's, recorded at sampling.

    >>> truncated_is_weights(torch.tensor([[0.0, 0.0]]), torch.tensor([[0.0, -2.0]]), cap=2.0)
    tensor([[1., 2.]])
    """
    assert old_logp.shape == rollout_logp.shape, (tuple(old_logp.shape), tuple(rollout_logp.shape))
    return torch.exp(old_logp.detach() - rollout_logp.detach()).clamp(max=cap)


def tis_metrics(old_logp: torch.Tensor, rollout_logp: torch.Tensor, mask: torch.Tensor, cap: float) -> dict:
    """Over the sampled tokens (``mask`` 1): the mean TIS weight and the fraction whose ratio exceeded the cap."""
    ratio = torch.exp(old_logp.detach() - rollout_logp.detach())
    mask = mask.to(ratio.dtype)
    n = float(mask.sum().clamp(min=1))
    return {"tis/weight_mean": float((ratio.clamp(max=cap) * mask).sum()) / n,
            "tis/capped_frac": float(((ratio > cap).to(ratio.dtype) * mask).sum()) / n}


def decoupled_weights(prox_logp: torch.Tensor, behav_logp: torch.Tensor, cap: float = 0.0) -> torch.Tensor:
    """The decoupled objective's behaviour weights ``pi_prox / pi_behav = exp(prox_logp - behav_logp)``
    ``[B, T]``, detached; with ``cap > 0`` a token whose weight exceeds ``cap`` gets weight 0 (it leaves the
    gradient, as AReaL's ``behav_imp_weight_cap`` masks it), instead of TIS's truncation to the cap.

    ``prox_logp``: the proximal policy's log-probs, i.e. the policy at the start of the update (trajkit's
    recomputed ``old_logp``); ``behav_logp``: the engine's, per token under the version that sampled it.

    >>> decoupled_weights(torch.tensor([[0.0, 0.0, 0.0]]), torch.tensor([[0.0, -0.5, -2.0]]), cap=2.0)
    tensor([[1.0000, 1.6487, 0.0000]])
    """
    assert prox_logp.shape == behav_logp.shape, (tuple(prox_logp.shape), tuple(behav_logp.shape))
    w = torch.exp(prox_logp.detach() - behav_logp.detach())
    return torch.where(w <= cap, w, torch.zeros_like(w)) if cap > 0 else w


def decoupled_metrics(weights: torch.Tensor, prox_logp: torch.Tensor, behav_logp: torch.Tensor,
                      mask: torch.Tensor) -> dict:
    """Over the sampled tokens (``mask`` 1): the mean and largest behaviour weight ``exp(prox - behav)``
    before any cap, and the fraction the cap removed (``weights`` from :func:`decoupled_weights`)."""
    ratio = torch.exp(prox_logp.detach() - behav_logp.detach())
    mask = mask.to(ratio.dtype)
    n = float(mask.sum().clamp(min=1))
    removed = ((weights == 0) & (ratio > 0)).to(ratio.dtype) * mask
    return {"decoupled/weight_mean": float((ratio * mask).sum()) / n,
            "decoupled/weight_max": float((ratio * mask).max()) if mask.any() else 0.0,
            "decoupled/masked_frac": float(removed.sum()) / n}


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference): ``exp(ref - logp) - (ref - logp) - 1`` ``[B, T]``."""
    assert logp.shape == ref_logp.shape
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def importance_ratio(spec: LossSpec, logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``exp(logp - old_logp)`` per token ``[B, T]``, or per sequence ``[B, 1]`` (mean log-ratio) for a
    sequence-ratio loss; differentiable."""
    if not spec.sequence_ratio:
        return torch.exp(logp - old_logp)
    return torch.exp(((logp - old_logp) * mask).sum(1, keepdim=True) / mask.sum(1, keepdim=True).clamp(min=1))


def policy_loss(name: str, logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                mask: torch.Tensor, norm: LossNorm, clip_low: float | None = None,
                clip_high: float | None = None, ref_logp: torch.Tensor | None = None, kl_coef: float = 0.0,
                tis_weights: torch.Tensor | None = None, kl_ratio: bool = False):
    """Loss ``name`` from :data:`LOSSES` plus ``kl_coef * KL`` when ``ref_logp`` is given (each token's KL
    times the importance ratio when ``kl_ratio``).

    ``clip_low``/``clip_high`` default to the loss's paper values; ``tis_weights: [B, T]`` (from
    :func:`truncated_is_weights`) multiply the policy-gradient term per token. Returns (scalar loss, metrics).
    """
    spec = LOSSES[name]
    low = spec.clip_low if clip_low is None else clip_low
    high = spec.clip_high if clip_high is None else clip_high
    if tis_weights is None:
        loss, stats = spec.fn(logp, old_logp, advantages, mask, norm, low, high)
    elif not (spec.token_weights or spec.sequence_weights):
        raise ValueError(f"loss {name!r} takes no per-token importance weights (TIS needs a token-level loss)")
    else:
        loss, stats = spec.fn(logp, old_logp, advantages, mask, norm, low, high, weights=tis_weights)
    if ref_logp is not None and kl_coef > 0.0:
        per_token = kl_k3(logp, ref_logp)
        if kl_ratio:
            per_token = per_token * importance_ratio(spec, logp, old_logp, mask.to(logp.dtype))
        kl = spec.aggregate(per_token, mask.to(logp.dtype), norm)
        loss = loss + kl_coef * kl
        stats["kl_ref"] = float(kl.detach())
    stats["pg_loss"] = float(loss.detach())
    return loss, stats
