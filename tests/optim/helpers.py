"""A tiny Llama and a token-level loss shared by the optimiser tests."""
from __future__ import annotations

import torch

from trajkit.models.spec import TinySpec, build_model

VOCAB = 40  # no target weight has a [40, *] shape


def tiny(seed: int = 0, dtype: torch.dtype = torch.float32):
    return build_model(TinySpec(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_heads=4,
                                num_kv_heads=2), seed=seed, dtype=dtype).train()


def tokens(rows: int = 4, width: int = 12, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (rows, width), generator=torch.Generator().manual_seed(seed))


def summed_loss(model, ids: torch.Tensor) -> torch.Tensor:
    """Sum over tokens of the next-token cross-entropy (sums of micro-batches equal the full batch's)."""
    logits = model(input_ids=ids).logits[:, :-1].float()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                                             reduction="sum")


def dense_grads(model, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{parameter name: dense gradient}`` of :func:`summed_loss` on an unsketched model."""
    model.zero_grad(set_to_none=True)
    summed_loss(model, ids).backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}
