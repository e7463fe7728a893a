"""Next-token logits of a batch whose rows share a prefix, the prefix run once.

A GRPO step's rows repeat each prompt G times, and a chat template puts the same system prompt in front of
every prompt: for the packaged SmolLM2 task every row starts with the same ~40 of its 44 prompt tokens.
The dense forward computes those positions once per row. Here the shared prefix of all rows (tokens equal
and all real) runs once, as a batch of one, into a KV cache; the cache is repeated to the batch's rows and
the rest of every row runs on top of it. Causal attention makes each row's hidden states after the prefix
those of the dense forward (same keys and values, same positions), and the gradient reaching the prefix
is the sum of what the rows send it, which is what the dense forward's repeated prefix receives in total.
Only the positions from ``start`` on get the output layer (``logits_to_keep``), so the prefix is taken no
longer than ``start``: every logit that is kept comes from the second forward.

Used by :func:`trajkit.rl.batching.forward_logits` when the model takes ``logits_to_keep`` and a cache, the
prefix is at least :data:`MIN_PREFIX` tokens, no layer checkpoints activations (a checkpointed layer
drops the cache) and the model is not FSDP2-sharded. Values agree with the dense forward to float32
rounding (the matmuls are blocked differently), not bitwise.
"""
from __future__ import annotations

import torch

MIN_PREFIX = 8  # shorter shared prefixes are not worth a second forward call


def common_prefix(input_ids: torch.Tensor, attention: torch.Tensor) -> int:
    """``input_ids, attention: [B, L]`` -> how many leading positions every row has equal and real.

    >>> common_prefix(torch.tensor([[5, 6, 7, 1], [5, 6, 8, 1]]), torch.ones(2, 4, dtype=torch.long))
    2
    """
    same = (input_ids == input_ids[:1]).all(0) & (attention > 0).all(0)  # [L]
    return int(same.long().cumprod(0).sum())


def usable_prefix(input_ids: torch.Tensor, attention: torch.Tensor, start: int) -> int:
    """The shared prefix a forward of these rows runs once: their :func:`common_prefix`, at most ``start`` (the
    first scored column, whose output the rows need), 0 when shorter than :data:`MIN_PREFIX`.

    >>> usable_prefix(torch.arange(20).repeat(2, 1), torch.ones(2, 20, dtype=torch.long), 12)
    12
    >>> usable_prefix(torch.arange(20).repeat(2, 1), torch.ones(2, 20, dtype=torch.long), 5)
    0
    """
    prefix = min(common_prefix(input_ids, attention), start)
    return prefix if prefix >= MIN_PREFIX else 0


def can_share(model, keywords: tuple[str, bool], rows: int, prefix: int) -> bool:
    """Whether :func:`shared_prefix_logits` applies: several rows, a prefix of :data:`MIN_PREFIX` or more,
    a model taking ``logits_to_keep``, no activation checkpointing (which would drop the cache) and no FSDP2
    sharding (it reshards after each forward, and two forwards before one backward break its unshard)."""
    from torch.distributed.fsdp import FSDPModule

    _, has_keep = keywords
    if rows < 2 or prefix < MIN_PREFIX or not has_keep:
        return False
    return not any(getattr(m, "gradient_checkpointing", False) or isinstance(m, FSDPModule) for m in model.modules())


def shared_prefix_logits(model, input_ids: torch.Tensor, attention: torch.Tensor, prefix: int, start: int,
                         cache_kw: str) -> torch.Tensor:
    """``input_ids, attention: [B, L]`` whose first ``prefix`` (<= ``start``) positions every row shares ->
    the model's logits at positions ``start..L-1``, ``[B, L-start, V]`` (the caller's autocast applies)."""
    assert 0 < prefix <= start < input_ids.shape[1], (prefix, start, input_ids.shape)
    b, width = input_ids.shape
    cache = prefix_cache(model, input_ids, attention, prefix, cache_kw)
    cache.batch_repeat_interleave(b)
    out = model(input_ids=input_ids[:, prefix:], attention_mask=attention, use_cache=True,
                logits_to_keep=width - start, **{cache_kw: cache})
    return out.logits


def prefix_cache(model, input_ids: torch.Tensor, attention: torch.Tensor | None, prefix: int, cache_kw: str):
    """The KV cache of the first row's first ``prefix`` tokens (a batch of one, with its graph): what every
    row's rest runs on top of (here, and packed in :mod:`trajkit.rl.packed`, which passes no ``attention``:
    the prefix is all real)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    mask = attention[:1, :prefix] if attention is not None else None
    model(input_ids=input_ids[:1, :prefix], attention_mask=mask, use_cache=True, logits_to_keep=1,
          **{cache_kw: cache})
    return cache
