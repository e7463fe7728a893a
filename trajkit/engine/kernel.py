"""Speculative accept / resample: the pure tensor kernel of lossless speculative sampling.

Algorithm (Leviathan, Kalman & Matias 2023, "Fast Inference from Transformers via Speculative
Decoding"; Chen et al. 2023, "Accelerating LLM Decoding with Speculative Sampling"): a drafter proposes
``x_1..x_k`` with ``x_i ~ q_i``; one target forward gives ``p_1..p_{k+1}``. Draft ``i`` is accepted with
probability ``min(1, p_i(x_i) / q_i(x_i))`` (as ``u_i * q_i(x_i) < p_i(x_i)``), stopping at the first
rejection. On a rejection at ``i`` the token is drawn from ``norm(max(0, p_i - q_i))``; after accepting all
drafts a bonus token is drawn from ``p_{k+1}``. Every emitted token is then distributed exactly as ``p``.

Here ``p`` and ``q`` are the *post-warping* distributions (temperature, top-k, top-p) that are actually
sampled from. Greedy decoding is the special case of point masses: a draft is accepted iff it is the
target's argmax, and the residual is the target's argmax.

Deviations and extensions:
- ``q=None`` means one-hot proposals ``q_i = delta(x_i)`` (n-gram / prompt lookup): the acceptance
  probability is ``p_i(x_i)`` and the residual is ``p_i`` with ``x_i`` removed.
- ``draft_len[b] <= k`` lets rows propose fewer tokens (no n-gram match, budget nearly spent). Position
  ``draft_len[b]`` is then not a draft: nothing is accepted there and the token is drawn from ``p``
  itself, which is the residual of an empty proposal.
- If rounding leaves a rejected position with an all-zero residual (only possible when ``p`` and ``q``
  are equal up to rounding), the token is drawn from ``p``.
"""
from __future__ import annotations

import torch

from trajkit.engine.warp import sample


def verify_drafts(p: torch.Tensor, draft: torch.Tensor, q: torch.Tensor | None, draft_len: torch.Tensor,
                  u_accept: torch.Tensor, u_final: torch.Tensor):
    """Accept/resample a batch of proposals.

    Args:
        p: ``[B, k+1, V]`` target probs at the positions of drafts ``1..k`` and of the bonus token.
        draft: ``[B, k]`` long, proposed tokens (entries at ``i >= draft_len[b]`` are ignored).
        q: ``[B, k, V]`` drafter probs the drafts were sampled from, or None for one-hot proposals.
        draft_len: ``[B]`` long in ``[0, k]``, real drafts per row.
        u_accept: ``[B, k]`` uniforms in [0, 1) for the accept tests.
        u_final: ``[B]`` uniforms in [0, 1) for the resampled or bonus token.

    Returns:
        ``n_accepted: [B]`` long, ``next_token: [B]`` long (the token after the accepted drafts), and
        ``overlap: [B, k]`` = ``sum_v min(p_i, q_i)``, each position's expected acceptance probability.
    """
    b, k1, v = p.shape
    k = k1 - 1
    assert draft.shape == (b, k) and u_accept.shape == (b, k) and draft_len.shape == (b,), \
        (p.shape, draft.shape, u_accept.shape, draft_len.shape)
    assert u_final.shape == (b,) and (q is None or q.shape == (b, k, v)), (u_final.shape, None if q is None else q.shape)
    if k == 0:
        return (torch.zeros(b, dtype=torch.long, device=p.device), sample(p[:, 0], u_final),
                p.new_zeros(b, 0))
    p_draft = p[:, :k].gather(-1, draft.unsqueeze(-1)).squeeze(-1)  # [B, k]
    q_draft = q.gather(-1, draft.unsqueeze(-1)).squeeze(-1) if q is not None else torch.ones_like(p_draft)
    in_draft = torch.arange(k, device=p.device).unsqueeze(0) < draft_len.unsqueeze(1)  # [B, k]
    accept = (u_accept * q_draft < p_draft) & in_draft  # [B, k]
    n_accepted = accept.long().cumprod(dim=1).sum(dim=1)  # [B]
    rows = torch.arange(b, device=p.device)
    p_next = p[rows, n_accepted]  # [B, V]
    at = n_accepted.clamp(max=k - 1)  # [B]: the rejected position (ignored when nothing was rejected)
    if q is None:
        residual = p_next.scatter(-1, draft[rows, at].unsqueeze(-1), 0.0)
        overlap = p_draft
    else:
        residual = (p_next - q[rows, at]).clamp(min=0.0)
        overlap = torch.minimum(p[:, :k], q).sum(dim=-1)
    rejected = (n_accepted < draft_len) & (residual.sum(dim=-1) > 0)  # [B]
    dist = torch.where(rejected.unsqueeze(-1), residual, p_next)  # [B, V]
    return n_accepted, sample(dist, u_final), overlap


def emitted_tokens(draft: torch.Tensor, n_accepted: torch.Tensor, next_token: torch.Tensor) -> torch.Tensor:
    """``draft: [B, k]``, ``n_accepted: [B]``, ``next_token: [B]`` -> ``[B, k+1]``: row b's emitted
    tokens are the first ``n_accepted[b] + 1`` entries (accepted drafts, then the next token)."""
    b, k = draft.shape
    out = torch.cat([draft, draft.new_zeros(b, 1)], dim=1)
    return out.scatter(1, n_accepted.unsqueeze(1), next_token.unsqueeze(1))
