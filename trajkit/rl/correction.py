"""Off-policy correction: the per-token weights ``[B, T]`` of the policy-gradient term, from the ratio of the
trainer's recomputed log-probs to the engine's.

Per sampled token the behaviour ratio is ``r = exp(old_logp - engine_logp)``: ``old_logp`` the trainer's
recomputation (``pi_old``, the proximal policy of the decoupled objective), ``engine_logp`` what the engine
recorded when it sampled the token (``q``; per token under the version that sampled it when asynchronous).
Two kinds of correction compose, in this order:

1. **Rejection** (a 0/1 mask; tokens and sequences whose ratio leaves a trust band leave the gradient):

   - ``token_mask`` (IcePop, the Ling team's Ring-1T report; AReaL's IcePop, prime-rl's
     ``token_mask_low``/``token_mask_high``, verl's token-level rejection): a token whose ``r`` leaves
     ``[token_mask_low, token_mask_high]`` gets weight 0. Default band ``[0.5, 2]``, IcePop's and the one
     SkyRL recommends.
   - ``seq_mask`` (verl's sequence and geometric rejection, SkyRL's sequence mask, TRL's
     ``vllm_importance_sampling_mode=sequence_mask``): every token of a sequence gets weight 0 when the
     sequence's statistic leaves ``[seq_mask_low, seq_mask_high]``: ``arithmetic``, the mean of its tokens'
     ``r``; ``geometric``, ``exp`` of the mean of ``log r`` (the per-token geometric mean of the sequence
     ratio, length-normalised, so a long sequence is not masked for its length alone). Default bands
     (:data:`SEQ_MASK_BANDS`): ``geometric`` ``[0.99, 1.01]`` (SkyRL's recommendation), ``arithmetic``
     ``[0.5, 2]``.

2. **Reweighting** of the tokens that survive: ``loss.tis``, ``min(r, tis_cap)``
   (:func:`trajkit.rl.losses.truncated_is_weights`), or ``loss.decoupled``, AReaL's uncapped ``r``
   (:func:`trajkit.rl.losses.decoupled_weights`); neither, weight 1. IcePop's ``M(r) = r`` inside the band,
   0 outside, is ``token_mask`` with ``tis`` (and ``tis_cap >= token_mask_high``, so the in-band ``r`` is
   never truncated).

This is verl's split of rollout correction into rejection sampling and importance weights. A masked token
keeps its place in the batch's counts (:class:`trajkit.rl.losses.LossNorm`), as the decoupled cap does, so
micro-batches still sum exactly to the full batch's loss; AReaL and prime-rl drop it from the token count
instead. The KL term is not masked: the correction acts on the policy-gradient estimator only.

GSPO (one ratio per sequence) takes only the sequence mask: a token mask would have to change the
sequence's own ratio. ``loss.decoupled_cap`` with ``token_mask`` is refused (two upper bounds on the same
ratio; ``token_mask_high`` is the one to set). Off (the default), :func:`correction_weights` returns the
TIS/decoupled weights or None, exactly as before: no mask is built and the step does no extra work.

Metrics (over sampled tokens, once per step): ``correction/tokens_masked`` (the share of sampled tokens
either mask removed), ``correction/seqs_masked`` (the share of sequences with a sampled token that the
sequence mask removed), and the ratio's ``correction/ratio_min``, ``_p01``, ``_p50``, ``_p99``, ``_max``.
"""
from __future__ import annotations

import torch

from trajkit.errors import ConfigError
from trajkit.rl.losses import decoupled_metrics, decoupled_weights, tis_metrics, truncated_is_weights

SEQ_MASKS = ("none", "arithmetic", "geometric")
SEQ_MASK_BANDS = {"arithmetic": (0.5, 2.0), "geometric": (0.99, 1.01)}
TOKEN_BAND = (0.5, 2.0)  # the LossConfig defaults of token_mask_low, token_mask_high
QUANTILES = {"p01": 0.01, "p50": 0.5, "p99": 0.99}


def seq_band(loss) -> tuple[float, float]:
    """``(low, high)`` of the sequence mask: ``loss.seq_mask_low``/``_high``, each defaulting to the mode's
    band in :data:`SEQ_MASK_BANDS`."""
    low, high = SEQ_MASK_BANDS[loss.seq_mask]
    return (low if loss.seq_mask_low is None else loss.seq_mask_low,
            high if loss.seq_mask_high is None else loss.seq_mask_high)


def check_config(loss, sequence_ratio: bool) -> None:
    """The mask keys of a :class:`trajkit.rl.config.LossConfig` (``sequence_ratio``: the loss has one ratio per
    sequence), each refusal naming the key and what to set; the bands' own ranges (low in [0, 1), high > 1, so
    an on-policy token or sequence, ratio 1, always stays) are ``LossConfig.__ranges__``."""
    if not loss.token_mask and (loss.token_mask_low, loss.token_mask_high) != TOKEN_BAND:
        raise ConfigError("loss.token_mask_low/token_mask_high are the band of the token mask; set "
                          "loss.token_mask=true (or drop them)")
    if loss.seq_mask not in SEQ_MASKS:
        raise ConfigError(f"loss.seq_mask must be one of {', '.join(SEQ_MASKS)}, got {loss.seq_mask!r}")
    if loss.seq_mask == "none" and (loss.seq_mask_low is not None or loss.seq_mask_high is not None):
        raise ConfigError("loss.seq_mask_low/seq_mask_high are the band of the sequence mask; set "
                          "loss.seq_mask=arithmetic or geometric (or drop them)")
    if loss.token_mask and sequence_ratio:
        raise ConfigError(f"loss.token_mask with loss.name={loss.name}: the loss has one ratio per sequence, a token "
                          "mask would change it; use loss.seq_mask (or a token-level loss)")
    if loss.token_mask and loss.decoupled and loss.decoupled_cap > 0:
        raise ConfigError("loss.decoupled_cap with loss.token_mask: both bound the same ratio from above; set "
                          "loss.token_mask_high and loss.decoupled_cap=0")


def masking(loss) -> bool:
    """Whether ``loss`` masks tokens or sequences."""
    return loss.token_mask or loss.seq_mask != "none"


def sequence_ratio(log_ratio: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """``log_ratio, mask: [B, T]`` -> ``[B]``: the mean of ``exp(log_ratio)`` over each row's sampled tokens
    (``arithmetic``) or ``exp`` of the mean ``log_ratio`` (``geometric``); 1 for a row with none.

    >>> lr = torch.log(torch.tensor([[1.0, 4.0, 9.0]]))
    >>> m = torch.tensor([[1.0, 1.0, 0.0]])
    >>> sequence_ratio(lr, m, "arithmetic").tolist(), sequence_ratio(lr, m, "geometric").tolist()
    ([2.5], [2.0])
    """
    n = mask.sum(1).clamp(min=1)
    if mode == "geometric":
        return torch.exp((log_ratio * mask).sum(1) / n)
    return (torch.exp(log_ratio) * mask).sum(1) / n + (mask.sum(1) == 0).to(mask.dtype)


def rejection_mask(log_ratio: torch.Tensor, mask: torch.Tensor, token_band: tuple[float, float] | None,
                   seq_mode: str, seq_band_: tuple[float, float] | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``log_ratio, mask: [B, T]`` -> (keep ``[B, T]`` 0/1, the rows the sequence mask removed ``[B]`` bool).

    ``token_band``: ``(low, high)`` or None (no token mask); ``seq_mode``: ``none``, ``arithmetic`` or
    ``geometric`` with ``seq_band_``. A bound is inclusive: a ratio equal to it stays.

    >>> keep, rows = rejection_mask(torch.log(torch.tensor([[1.0, 3.0], [0.9, 0.2]])), torch.ones(2, 2),
    ...                             (0.5, 2.0), "geometric", (0.5, 2.0))
    >>> keep.tolist(), rows.tolist()
    ([[1.0, 0.0], [0.0, 0.0]], [False, True])
    """
    keep = torch.ones_like(mask)
    if token_band is not None:
        ratio = torch.exp(log_ratio)
        keep = keep * ((ratio >= token_band[0]) & (ratio <= token_band[1])).to(mask.dtype)
    removed = torch.zeros(mask.shape[0], dtype=torch.bool, device=mask.device)
    if seq_mode != "none":
        s = sequence_ratio(log_ratio, mask, seq_mode)
        removed = ((s < seq_band_[0]) | (s > seq_band_[1])) & (mask.sum(1) > 0)
        keep = keep * (~removed).to(mask.dtype).unsqueeze(1)
    return keep, removed


def ratio_quantiles(log_ratio: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Min, p01, p50, p99 and max of ``exp(log_ratio)`` over the sampled tokens (nearest rank on the sorted
    values; no size limit, unlike ``torch.quantile``)."""
    values = torch.exp(log_ratio[mask.bool()].to(torch.float64)).sort().values
    if values.numel() == 0:
        return {f"correction/ratio_{k}": 1.0 for k in ("min", *QUANTILES, "max")}
    n = values.numel()
    out = {"correction/ratio_min": float(values[0])}
    for name, q in QUANTILES.items():
        out[f"correction/ratio_{name}"] = float(values[min(n - 1, round(q * (n - 1)))])
    out["correction/ratio_max"] = float(values[-1])
    return out


def mask_metrics(keep: torch.Tensor, removed: torch.Tensor, log_ratio: torch.Tensor, mask: torch.Tensor) -> dict:
    """The shares of sampled tokens and of sequences (with a sampled token) masked, and the ratio's quantiles."""
    n_tokens = float(mask.sum().clamp(min=1))
    n_seqs = max(int((mask.sum(1) > 0).sum()), 1)
    out = {"correction/tokens_masked": float(((1.0 - keep) * mask).sum()) / n_tokens,
           "correction/seqs_masked": float(removed.sum()) / n_seqs}
    out.update(ratio_quantiles(log_ratio, mask))
    return out


def correction_weights(loss, old_logp: torch.Tensor, engine_logp: torch.Tensor,
                       mask: torch.Tensor) -> tuple[torch.Tensor | None, dict]:
    """The policy-gradient weights ``[B, T]`` (detached) of a step and their metrics, for ``loss`` (a
    :class:`trajkit.rl.config.LossConfig`): the rejection mask times the TIS or decoupled weight; None when
    neither a mask nor a reweighting is on (the plain loss)."""
    metrics: dict[str, float] = {}
    weights = None
    if loss.tis:
        weights = truncated_is_weights(old_logp, engine_logp, loss.tis_cap)
        metrics.update(tis_metrics(old_logp, engine_logp, mask, loss.tis_cap))
    elif loss.decoupled:
        weights = decoupled_weights(old_logp, engine_logp, loss.decoupled_cap)
        metrics.update(decoupled_metrics(weights, old_logp, engine_logp, mask))
    if not masking(loss):
        return weights, metrics
    log_ratio = (old_logp.detach() - engine_logp.detach()) * mask
    token_band = (loss.token_mask_low, loss.token_mask_high) if loss.token_mask else None
    band = seq_band(loss) if loss.seq_mask != "none" else None
    keep, removed = rejection_mask(log_ratio, mask.to(log_ratio.dtype), token_band, loss.seq_mask, band)
    metrics.update(mask_metrics(keep, removed, log_ratio, mask.to(log_ratio.dtype)))
    if weights is None:
        return keep, metrics
    return torch.where(keep > 0, weights, torch.zeros_like(weights)), metrics  # an inf weight masked is 0
