"""Update directions for one sketch ``S: [out, rank]``: RowAdam (LoGRA's) and plain SGD.

RowAdam keeps no first moment and one second moment per *output row* of the weight, ``v: [out, 1]``:

    v_t = beta2 * v_{t-1} + (1 - beta2) * mean_k S[:, k]^2          (mean over the rank columns)
    D   = S / (sqrt(v_t / (1 - beta2^t)) + eps)                       (bias-corrected, as in Adam)

The state is indexed by the weight's rows, which keep their meaning from step to step, not by the
sketch's columns, which belong to a projection redrawn every step (a per-entry moment of S would mix
unrelated coordinates). With E[AᵀA] = I the mean square of a sketch row is ``|g_row|^2 / rank`` in
expectation, so ``D`` has entries of RMS ~1 and the merged update ``D A`` has entries of size ~1, like
Adam's normalised step: the same learning rates transfer.
"""
from __future__ import annotations

import torch


def row_adam_direction(sketch: torch.Tensor, second_moment: torch.Tensor, step: int, beta2: float,
                       eps: float, inplace: bool = False) -> torch.Tensor:
    """``sketch: [out, rank]``, ``second_moment: [out, 1]`` (updated in place), ``step`` 1-based -> ``D``.

    >>> s = torch.tensor([[3.0, 4.0], [0.0, 0.0]]); v = torch.zeros(2, 1)
    >>> d = row_adam_direction(s, v, step=1, beta2=0.9, eps=1e-8)   # each row divided by its RMS, 3.5355
    >>> [[round(x, 4) for x in row] for row in d.tolist()]
    [[0.8485, 1.1314], [0.0, 0.0]]
    """
    assert sketch.dim() == 2 and second_moment.shape == (sketch.shape[0], 1), "sketch [out, rank], v [out, 1]"
    if step < 1:
        raise ValueError(f"step must be >= 1 (1-based, for bias correction), got {step}")
    rank = sketch.shape[1]
    mean_sq = torch.linalg.vector_norm(sketch, dim=1, keepdim=True).square_().div_(rank)
    second_moment.mul_(beta2).add_(mean_sq, alpha=1 - beta2)
    denom = (second_moment / (1 - beta2 ** step)).sqrt_().add_(eps)
    return sketch.div_(denom) if inplace else sketch / denom


def sgd_direction(sketch: torch.Tensor, second_moment: torch.Tensor, step: int, beta2: float, eps: float,
                  inplace: bool = False) -> torch.Tensor:
    """The sketch itself: ``Delta W = -lr S A``, an unbiased estimate of the dense SGD step."""
    return sketch if inplace else sketch.clone()


UPDATES = {"row_adam": row_adam_direction, "sgd": sgd_direction}
