"""Next-token log-probs of a micro-batch's rows packed into one sequence: no padding, the shared prefix once.

A micro-batch is right-padded to its longest row, and the forward computes every padded position: a GRPO
step on the packaged SmolLM2 task has replies of 3 to 64 tokens, so about a third of the positions its update
computes are padding. Here the rows' tokens after their shared prefix (:mod:`trajkit.rl.shared_prefix`) are
concatenated into one sequence of ``T`` tokens, run on top of the prefix's KV cache (batch of one). A 4D
mask lets each token see the prefix and the earlier tokens of its own row only, and each row's position ids
continue from the prefix, so every token has the dense forward's keys, values and positions: its hidden
states, and the gradient the loss sends through them, are the dense forward's up to float32 rounding (the
matmuls are blocked differently; not bitwise). The output layer runs only at the positions that are scored
(``logits_to_keep`` given as indices), and the log-probs are put back in their ``[B, L-1]`` columns; every
other column is 0.

It is used by :func:`trajkit.rl.batching.token_logprobs` and :func:`~trajkit.rl.batching.token_logprobs_and_dists`
(the update, the ``logprob`` stage, the reference model and a distillation teacher) when:

- the model is a decoder whose every layer attends causally over the whole sequence, through a mask the model
  takes as given (:data:`PACKABLE`: Llama, Qwen2 and Qwen3 without a sliding window; ``sdpa`` or ``eager``
  attention), takes ``logits_to_keep`` and a cache, does not checkpoint activations and is not FSDP2-sharded
  (as for the shared prefix);
- the rows are right-padded (each row's tokens first, then padding), as :func:`trajkit.rl.batching.collate`
  makes them;
- the mask, ``T x (prefix + T)``, holds at most :data:`MAX_MASK_ELEMENTS` entries;
- it is predicted to cost less than the padded forward: matmul work ``2 N`` per token (``N`` the parameters
  outside the input embedding) plus attention work ``4 d l`` per (query, key) pair (``d`` the hidden size,
  ``l`` the layers), packed (``T`` tokens, ``T x (prefix + T)`` pairs; every row sees every other's keys,
  masked) against padded (``B x (W - prefix)`` tokens, as many times ``W`` pairs). Rows of equal length never
  pack (nothing to save); long rows of very unequal length do, short ones with little padding do not.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from trajkit.rl import shared_prefix

PACKABLE = frozenset({"llama", "qwen2", "qwen3"})
MAX_MASK_ELEMENTS = 2 ** 25  # 32 Mi (query, key) pairs: 32 MiB as booleans, 128 MiB as a float32 mask
ENABLED = True  # tests switch packing off to compare with the padded forward


@dataclass(frozen=True)
class Plan:
    """How one micro-batch packs: the shared ``prefix`` (0: none) and each row's real length."""

    prefix: int
    lengths: list[int]


def plan(model, input_ids: torch.Tensor, attention: torch.Tensor, lengths: torch.Tensor, start: int,
         keywords: tuple[str, bool]) -> Plan | None:
    """The packing of the rows of ``input_ids, attention: [B, W]`` (``lengths: [B]`` real tokens each) whose
    log-probs are read from column ``start`` on, or None where the padded forward applies (the module's
    conditions, above)."""
    b, width = input_ids.shape
    if not ENABLED or b < 2 or not packable(model, keywords):
        return None
    lens = [int(n) for n in lengths.tolist()]
    right_padded = torch.arange(width, device=attention.device)[None] < lengths.to(attention.device)[:, None]
    if not torch.equal(attention > 0, right_padded):
        return None
    prefix = shared_prefix.usable_prefix(input_ids, attention, start)
    tokens = sum(lens) - b * prefix
    if tokens * (prefix + tokens) > MAX_MASK_ELEMENTS:
        return None
    n, pair = matmul_params(model), 4 * model.config.hidden_size * model.config.num_hidden_layers
    padded = b * (width - prefix)
    if 2 * n * tokens + pair * tokens * (prefix + tokens) >= 2 * n * padded + pair * padded * width:
        return None
    return Plan(prefix, lens)


def packable(model, keywords: tuple[str, bool]) -> bool:
    """Whether ``model`` takes a packed sequence exactly (the module's first condition)."""
    cfg = getattr(model, "config", None)
    if cfg is None or not keywords[1] or getattr(cfg, "model_type", None) not in PACKABLE:
        return False
    if getattr(cfg, "_attn_implementation", None) not in ("sdpa", "eager"):
        return False
    layer_types = getattr(cfg, "layer_types", None)
    if layer_types is not None and any(t != "full_attention" for t in layer_types):
        return False
    if getattr(cfg, "sliding_window", None) is not None and getattr(cfg, "use_sliding_window", True):
        return False
    return shared_prefix.can_share(model, keywords, 2, shared_prefix.MIN_PREFIX)


def matmul_params(model) -> int:
    """Parameters outside the input embedding (a lookup, not a matmul); the output layer counts."""
    embedding = model.get_input_embeddings().weight
    return sum(p.numel() for p in model.parameters() if p is not embedding) + \
        (embedding.numel() if model.get_output_embeddings() is not None
         and model.get_output_embeddings().weight is embedding else 0)


def packed_logits(model, input_ids: torch.Tensor, p: Plan, start: int, cache_kw: str
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One packed forward -> (the next-token logits at every scored position, ``[K, V]``, row-major: row
    ``i``'s columns ``start..len_i-2``; those positions' rows and columns in ``[B, L-1]``, ``[K]`` each).
    The caller's autocast applies."""
    device = input_ids.device
    prefix, lens = p.prefix, p.lengths
    tokens = torch.cat([input_ids[i, prefix:n] for i, n in enumerate(lens)])[None]  # [1, T]
    positions = torch.cat([torch.arange(prefix, n, device=device) for n in lens])  # [T]
    row_of = torch.cat([torch.full((n - prefix,), i, device=device) for i, n in enumerate(lens)])
    own = (row_of[:, None] == row_of[None, :]) & (positions[:, None] >= positions[None, :])  # [T, T]
    allowed = torch.cat([own.new_ones(len(positions), prefix), own], dim=1)[None, None]  # [1, 1, T, prefix + T]
    if model.config._attn_implementation == "eager":  # an additive mask; sdpa takes the booleans
        allowed = torch.zeros(allowed.shape, device=device).masked_fill_(~allowed, torch.finfo(torch.float32).min)
    ends = [max(n - 1, start) for n in lens]  # a row that ends before the first scored column has none scored
    rows = torch.cat([torch.full((e - start,), i, device=device) for i, e in enumerate(ends)])
    cols = torch.cat([torch.arange(start, e, device=device) for e in ends])
    first = torch.tensor([0, *lens[:-1]], device=device).cumsum(0) - prefix * torch.arange(len(lens), device=device)
    keep = first[rows] + cols - prefix  # where (row, column) sits in the packed sequence
    kwargs = {"use_cache": False}
    if prefix:
        kwargs = {"use_cache": True, cache_kw: shared_prefix.prefix_cache(model, input_ids, None, prefix, cache_kw)}
    out = model(input_ids=tokens, attention_mask=allowed, position_ids=positions[None], logits_to_keep=keep,
                **kwargs)
    return out.logits[0], rows, cols


def scatter(values: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """``values: [K]`` at ``(rows, cols)`` of a ``shape`` tensor of zeros (differentiable in ``values``)."""
    return values.new_zeros(shape).index_put((rows, cols), values)
