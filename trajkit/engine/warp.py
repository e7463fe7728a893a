"""Logit warping and exact sampling: pure tensor functions.

Warping turns raw logits into the distribution a token is actually drawn from, per row:

1. ``temperature == 0`` -> a point mass on ``argmax`` (first index on ties); nothing else applies.
2. divide the logits by the temperature;
3. top-k: keep the ``k`` largest (ties broken by lower token id; ``k = 0`` keeps all);
4. top-p (nucleus, Holtzman et al. 2020): over the renormalised top-k distribution, sorted by
   decreasing probability, keep a token iff the mass strictly before it is ``< top_p`` -- the smallest
   prefix with mass ``>= top_p`` (the most likely token is always kept);
5. renormalise.

This is HF's order (temperature, top-k, top-p). Deviation: HF's top-p removes tokens whose *ascending*
cumulative mass is ``<= 1 - top_p``, which differs from ours only when the boundary mass ties exactly.

Sampling uses the inverse CDF in float64 with one uniform per draw: the token is the first index whose
cumulative mass exceeds ``x = min(u * total, total * (1 - 2^-52))``. A zero-probability token can never
be chosen (its cumulative mass equals its predecessor's), and the clamp keeps the rare
``u * total == total`` rounding case on the last token with positive mass.
"""
from __future__ import annotations

import torch


def row_params(temperature: list[float], top_k: list[int], top_p: list[float], device) -> tuple:
    """Per-row warping parameters as tensors: ``([N] float, [N] long, [N] float)``."""
    return (torch.tensor(temperature, dtype=torch.float32, device=device),
            torch.tensor(top_k, dtype=torch.long, device=device),
            torch.tensor(top_p, dtype=torch.float32, device=device))


def warp_probs(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor,
               top_p: torch.Tensor, *, filtered: bool | None = None,
               any_greedy: bool | None = None) -> torch.Tensor:
    """``logits: [N, V]`` and per-row ``temperature, top_k, top_p: [N]`` -> ``probs: [N, V]`` (float32, or
    float64 for float64 logits).

    ``filtered`` (any row uses top-k or top-p) and ``any_greedy`` (any row has temperature 0) are computed
    when None; a hot loop passes them to save the checks.
    """
    assert logits.dim() == 2 and temperature.shape == top_k.shape == top_p.shape == logits.shape[:1], \
        (logits.shape, temperature.shape, top_k.shape, top_p.shape)
    logits = _at_least_float32(logits)
    greedy = temperature == 0  # [N]
    scaled = logits / torch.where(greedy, 1.0, temperature).unsqueeze(-1)
    if filtered is None:
        filtered = bool(((top_k > 0) | (top_p < 1)).any())
    if filtered:
        scaled = _filter(scaled, top_k, top_p)
    probs = torch.softmax(scaled, dim=-1)
    if any_greedy is None:
        any_greedy = bool(greedy.any())
    if any_greedy:
        one_hot = torch.zeros_like(probs).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
        probs = torch.where(greedy.unsqueeze(-1), one_hot, probs)
    return probs


def _at_least_float32(x: torch.Tensor) -> torch.Tensor:
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def _filter(scaled: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """``scaled: [N, V]`` -> the same logits with the top-k / top-p rejects set to ``-inf``."""
    n, v = scaled.shape
    sorted_logits, order = torch.sort(scaled, dim=-1, descending=True, stable=True)  # [N, V] each
    rank = torch.arange(v, device=scaled.device).unsqueeze(0)  # [1, V]
    k = torch.where(top_k > 0, top_k.clamp(max=v), v).unsqueeze(-1)  # [N, 1]
    keep = rank < k  # [N, V] in sorted order
    sorted_probs = torch.softmax(sorted_logits.masked_fill(~keep, float("-inf")), dim=-1)
    mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    keep &= (mass_before < top_p.unsqueeze(-1)) | (rank == 0)
    keep_unsorted = torch.zeros_like(keep).scatter_(-1, order, keep)
    return scaled.masked_fill(~keep_unsorted, float("-inf"))


def sample(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw: ``probs: [N, V]`` (need not sum to 1), ``u: [N]`` uniform in [0, 1) -> ``[N]`` long."""
    assert probs.dim() == 2 and u.shape == probs.shape[:1], (probs.shape, u.shape)
    cdf = torch.cumsum(probs.double(), dim=-1)  # [N, V]
    total = cdf[:, -1:]  # [N, 1]
    # strictly below the total, so some token's cumulative mass exceeds it: the first such token has
    # positive probability (a zero-probability token repeats its predecessor's cumulative mass)
    x = torch.minimum(u.double().unsqueeze(-1) * total, total * _BELOW_ONE)  # [N, 1]
    # the clamp changes nothing for finite probs (x < total); NaN probs (from NaN/inf logits) would index
    # one past the vocabulary: they get the last id, and the samplers report them (nonfinite_rows)
    return torch.searchsorted(cdf, x, right=True).squeeze(-1).clamp_(max=probs.shape[-1] - 1)


def nonfinite_rows(logits: torch.Tensor) -> torch.Tensor:
    """``logits: [..., V]`` -> ``[...]`` bool: a NaN, a ``+inf`` or nothing above ``-inf`` (no distribution).
    One pass: a row's maximum is NaN if it holds a NaN, ``+inf`` if it holds one, ``-inf`` if all are (1.2 ms
    against 0.04 ms per decode step of 16 rows over SmolLM2's 49,152 logits, 2 CPU cores).

    >>> inf, nan = float("inf"), float("nan")
    >>> nonfinite_rows(torch.tensor([[0., 1.], [nan, 1.], [inf, 1.], [-inf, -inf], [-inf, 0.], [-inf, nan]])).tolist()
    [False, True, True, True, False, True]
    """
    return ~torch.isfinite(logits.amax(-1))


_BELOW_ONE = 1.0 - 2.0 ** -52


def top_logprobs(probs: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` most likely tokens of ``probs: [..., V]`` -> (``log p: [..., k]``, ``ids: [..., k]``), most
    likely first; a token outside a top-k/top-p filter has log p = -inf."""
    values, ids = probs.topk(k, dim=-1)
    return torch.log(values), ids


def one_position(top: list) -> tuple[list, list] | None:
    """Host-side ``[log p, ids]`` of one position per row (``[B, k]`` each) -> the ``tops`` argument of
    :meth:`trajkit.engine.active.ActiveBatch.emit` (one position per row); None when nobody asked."""
    if not top:
        return None
    return [[row] for row in top[0]], [[row] for row in top[1]]


def token_logprobs(probs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``probs: [..., V]``, ``tokens: [...]`` -> ``log probs[..., tokens]``."""
    return torch.log(probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1))
