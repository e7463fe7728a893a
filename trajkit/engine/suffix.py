"""Approximate suffix reuse after an edit, measured against the exact path. Opt-in; never for RL rollouts.

When a call's prompt differs from the cached tokens inside (a Qwen3-style template drops earlier reasoning,
a harness edits its context), exact prefix reuse stops at the edit and everything after is prefilled again.
Suffix reuse (the idea of CLM's Suffix Cache Reuse; written here from the description, not their code) keeps
the states of *surviving blocks* — runs of >= ``min_block`` tokens of the new prompt found in the old
sequence at another position — and moves them:

- **RoPE re-rotation.** A cached key carries RoPE at its old position ``i``: ``k_i = R(i) k``. Rotations
  compose, ``R(j - i) R(i) = R(j)``, so rotating by the shift gives the key a fresh forward would put at ``j``
  (:func:`rerotate`; exact up to float rounding: tested for a block whose whole context moved with it).
  Values carry no position and are kept.
- **Boundary recompute.** The first and last ``boundary`` tokens of each block are computed by the model
  (with the approximate cache so far), the rest of the block is copied; everything outside the blocks is
  computed.

It is approximate by construction: a surviving token's K/V were computed while attending to the text that
the edit removed. :func:`suffix_reuse_kl` reports per-token ``KL(p_exact || p_approx)`` on a teacher-forced
continuation, top-1 agreement and the first greedy divergence; ``trajkit bench suffix-reuse`` tabulates them.
The gate for using it: only where mean KL <= 1e-3 and p95 <= 1e-2 on the model in use.

Scope: batch 1, standard (``rope_type: default``) rotate-half RoPE of Llama-family models; anything else is
refused with ConfigError.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from trajkit.engine.kvstate import forward_keywords
from trajkit.errors import ConfigError


@dataclass(frozen=True)
class Block:
    """``size`` tokens at ``old`` in the cached sequence that sit at ``new`` in the edited one."""

    old: int
    new: int
    size: int


def rope_inv_freq(model) -> torch.Tensor:
    """The model's RoPE inverse frequencies ``[D/2]``; ConfigError unless plain rotate-half RoPE."""
    rotary = getattr(getattr(model, "model", None), "rotary_emb", None)
    if rotary is None or not hasattr(rotary, "inv_freq"):
        raise ConfigError("suffix reuse needs a model with a rotary embedding (model.model.rotary_emb)")
    kind = getattr(rotary, "rope_type", "default")
    if kind != "default" or float(getattr(rotary, "attention_scaling", 1.0)) != 1.0:
        raise ConfigError(f"suffix reuse re-rotates plain RoPE only; this model's rope_type is {kind!r}")
    return rotary.inv_freq


def rerotate(keys: torch.Tensor, shift: int, inv_freq: torch.Tensor) -> torch.Tensor:
    """``keys: [B, H, T, D]`` with RoPE applied at positions ``p`` -> the same keys at ``p + shift``."""
    angle = shift * inv_freq.to(torch.float64)  # [D/2]
    cos = torch.cat([angle.cos(), angle.cos()]).to(keys.dtype)
    sin = torch.cat([angle.sin(), angle.sin()]).to(keys.dtype)
    half = keys.shape[-1] // 2
    rotated = torch.cat([-keys[..., half:], keys[..., :half]], dim=-1)
    return keys * cos + rotated * sin


def surviving_blocks(old: list[int], new: list[int], start: int, min_block: int = 64,
                     max_blocks: int = 8) -> list[Block]:
    """Runs of >= ``min_block`` ids of ``new[start:]`` that occur in ``old`` (in order, at most
    ``max_blocks``, longest first then by position), found by ``difflib``'s matching blocks."""
    matcher = difflib.SequenceMatcher(None, old, new[start:], autojunk=False)
    found = [Block(a, b + start, n) for a, b, n in matcher.get_matching_blocks() if n >= min_block]
    return sorted(sorted(found, key=lambda blk: -blk.size)[:max_blocks], key=lambda blk: blk.new)


@torch.no_grad()
def _forward(model, ids: list[int], start: int, cache) -> torch.Tensor:
    kw, _ = forward_keywords(model)
    positions = torch.arange(start, start + len(ids)).unsqueeze(0)
    return model(input_ids=torch.tensor([ids]), position_ids=positions, use_cache=True, **{kw: cache}).logits[0]


@torch.no_grad()
def old_states(model, old: list[int]) -> DynamicCache:
    """The exact cache of the old sequence (what a prefix cache holds)."""
    cache = DynamicCache(config=model.config)
    _forward(model, old, 0, cache)
    return cache


@torch.no_grad()
def approximate_cache(model, old: list[int], old_cache: DynamicCache, new: list[int],
                      min_block: int = 64, max_blocks: int = 8, boundary: int = 4) -> tuple[DynamicCache, dict]:
    """A cache for ``new`` from ``old``'s: the exact common prefix, surviving blocks re-rotated (their first
    and last ``boundary`` tokens recomputed), the rest computed. -> (cache, counts)."""
    inv_freq = rope_inv_freq(model)
    prefix = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
    prefix = min(prefix, len(new) - 1)
    cache = DynamicCache(config=model.config)
    for layer, src in zip(cache.layers, old_cache.layers):  # the exact prefix, shared
        cache_k, cache_v = src.keys[:, :, :prefix].clone(), src.values[:, :, :prefix].clone()
        layer.lazy_initialization(cache_k, cache_v)
        layer.keys, layer.values = cache_k, cache_v
    at, copied = prefix, 0
    for blk in surviving_blocks(old, new, prefix, min_block, max_blocks):
        if blk.size <= 2 * boundary or blk.new < at:
            continue
        head = blk.new + boundary
        if head > at:
            _forward(model, new[at:head], at, cache)
        tail = blk.new + blk.size - boundary
        src0, shift = blk.old + boundary, blk.new - blk.old
        for i, (layer, src) in enumerate(zip(cache.layers, old_cache.layers)):
            k = rerotate(src.keys[:, :, src0:src0 + tail - head], shift, inv_freq)
            cache.update(k, src.values[:, :, src0:src0 + tail - head], i)
        copied += tail - head
        at = tail
    if len(new) - 1 > at:  # the last prompt token is fed with the continuation
        _forward(model, new[at:-1], at, cache)
    return cache, {"prefix": prefix, "copied": copied, "computed": len(new) - 1 - prefix - copied}


@torch.no_grad()
def suffix_reuse_kl(model, old: list[int], new: list[int], continuation: list[int], **kw) -> dict:
    """Teacher-force ``continuation`` after ``new`` exactly (one full forward) and from the approximate cache;
    per-token KL(p_exact || p_approx), top-1 agreement, the first position where the greedy choices differ
    (-1: none), and the reuse counts."""
    full = torch.tensor([new + continuation])
    exact = model(input_ids=full).logits[0, len(new) - 1:-1].double().log_softmax(-1)  # [T, V]
    cache, counts = approximate_cache(model, old, old_states(model, old), new, **kw)
    approx = _forward(model, [new[-1]] + continuation[:-1], len(new) - 1, cache).double().log_softmax(-1)
    kl = (exact.exp() * (exact - approx)).sum(-1)  # [T]
    agree = exact.argmax(-1) == approx.argmax(-1)
    first = int((~agree).nonzero()[0]) if not bool(agree.all()) else -1
    return {"kl": kl.tolist(), "top1_agreement": float(agree.double().mean()), "first_divergence": first, **counts}
