"""Next-token log-probabilities without materialising the ``[B, L, V]`` logits.

A causal LM's loss needs only ``log p(x_{t+1})`` per position, yet the usual ``model(ids).logits`` path
keeps the full float32 logits, their log-softmax and, in backward, a gradient of the same size: with
SmolLM2's 49,152-token vocabulary that is ~200 MB per tensor for 8 x 128 tokens, often more than the
decoder's own activations. :func:`chunked_logprobs` runs the decoder body once, then the output layer,
log-softmax and gather over ``chunk`` positions at a time, each chunk under non-reentrant activation
checkpointing: only one chunk's ``[B, chunk, V]`` logits exist at a time, in forward and backward, and
what is kept for backward is the ``[B, L, hidden]`` hidden states plus ``[B, L]`` results. The values and
gradients are those of the dense path (same operations, regrouped by position).

Used by the RL trainer with ``optim.logits_chunk`` and by ``trajkit bench optim --logits-chunk``.
"""
from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from trajkit.errors import ConfigError


def _parts(model):
    """(decoder body, output layer) of a Hugging Face causal LM (peft-wrapped too)."""
    config = getattr(model, "config", None)
    for key in ("final_logit_softcapping", "logit_scale"):
        if getattr(config, key, None) not in (None, 1, 1.0):
            raise ConfigError(f"logits_chunk: {type(model).__name__} transforms its logits ({key}="
                              f"{getattr(config, key)}); chunked log-probs assume logits = lm_head(hidden). "
                              "Set logits_chunk=0.")
    try:
        body, head = model.get_decoder(), model.get_output_embeddings()
    except (AttributeError, NotImplementedError) as e:
        raise ConfigError(f"logits_chunk: {type(model).__name__} has no get_decoder()/get_output_embeddings(); "
                          "set logits_chunk=0") from e
    if body is None or head is None:
        raise ConfigError(f"logits_chunk: {type(model).__name__} exposes no decoder body or output layer; "
                          "set logits_chunk=0")
    return body, head


def check_chunkable(model) -> None:
    """Raise :class:`~trajkit.errors.ConfigError` unless :func:`chunked_logprobs` can run on ``model``."""
    _parts(model)


def _chunk_logprobs(head, hidden: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    logits = head(hidden).float() / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def chunked_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                     temperature: float = 1.0, chunk: int = 128) -> torch.Tensor:
    """``log p(input_ids[:, t+1] | input_ids[:, :t+1])`` at ``temperature`` -> ``[B, L-1]`` float32, the
    output layer applied ``chunk`` positions at a time (checkpointed when gradients are on)."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    body, head = _parts(model)
    hidden = body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, :-1]
    targets = input_ids[:, 1:]
    grad = torch.is_grad_enabled() and (hidden.requires_grad or any(p.requires_grad for p in head.parameters()))
    parts = []
    for lo in range(0, hidden.shape[1], chunk):
        h, t = hidden[:, lo:lo + chunk], targets[:, lo:lo + chunk]
        if grad:
            parts.append(checkpoint(_chunk_logprobs, head, h, t, temperature, use_reentrant=False))
        else:
            parts.append(_chunk_logprobs(head, h, t, temperature))
    return torch.cat(parts, dim=1)
