"""Random projections ``A: [rank, width]`` for gradient sketches, redrawn every step from a stable seed.

Every distribution is scaled so that ``E[AᵀA] = I`` (``width x width``). That scaling is what makes the
sketch an unbiased view of the dense gradient: with ``S = G Aᵀ`` (``G = Hᵀ X`` the dense gradient of a
linear weight), ``E[S A] = G E[AᵀA] = G``. Unscaled ±1 entries would give ``rank * G`` instead.

- ``rademacher`` (default, LoGRA's): entries ±1/sqrt(rank), equally likely.
- ``gaussian``: entries N(0, 1/rank).
- ``orthogonal``: ``rank`` orthonormal rows (QR of a Gaussian matrix), times sqrt(width/rank). At full rank
  (``rank == width``) ``AᵀA = I`` exactly, so the sketch step equals the dense step (a test checks it).

A is never stored across steps: :func:`projection_seed` maps (base seed, layer name, step) to a 63-bit seed,
and :func:`make_projection` redraws the same A from it on the weight's device whenever it is needed (each
micro-batch's forward and the optimiser step). The seed hashes the layer's *name*, not its position or
``id``, so it survives rebuilding the model and resuming from a checkpoint. Draws on CPU and on CUDA use
different generators, so the same seed gives a different (equally valid) A on each device type.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import torch

Draw = Callable[[int, int, torch.Generator, torch.device], torch.Tensor]


def _rademacher(rank: int, width: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    signs = torch.randint(0, 2, (rank, width), generator=gen, device=device, dtype=torch.int8)
    return (signs.to(torch.float32) * 2 - 1) / math.sqrt(rank)


def _gaussian(rank: int, width: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    return torch.randn(rank, width, generator=gen, device=device) / math.sqrt(rank)


def _orthogonal(rank: int, width: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    if rank > width:
        raise ValueError(f"orthogonal projection: rank {rank} exceeds the layer's input width {width}; "
                         "lower rank or use distribution='rademacher'")
    q, r = torch.linalg.qr(torch.randn(width, rank, generator=gen, device=device))
    q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)  # Haar-distributed columns
    return q.T.contiguous() * math.sqrt(width / rank)


DISTRIBUTIONS: dict[str, Draw] = {"rademacher": _rademacher, "gaussian": _gaussian, "orthogonal": _orthogonal}


def projection_seed(seed: int, name: str, step: int) -> int:
    """A stable 63-bit seed for layer ``name`` at optimiser step ``step`` (independent of Python's hash salt)."""
    digest = hashlib.blake2b(f"{seed}:{name}:{step}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def make_projection(distribution: str, rank: int, width: int, seed: int, device: torch.device | str = "cpu",
                    dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``A: [rank, width]`` drawn from ``distribution`` with a generator seeded by ``seed`` on ``device``."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution must be one of {sorted(DISTRIBUTIONS)}, got {distribution!r}")
    device = torch.device(device)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return DISTRIBUTIONS[distribution](rank, width, gen, device).to(dtype)
