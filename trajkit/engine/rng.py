"""Per-row random streams: each row draws from its own ``torch.Generator``.

Row ``i`` of a request with seed ``s`` uses a generator seeded with ``mix(s, i)``, a SplitMix64 hash of
the pair (Steele et al. 2014), so neighbouring rows get unrelated streams. torch's CPU Mersenne Twister
keeps 32 bits of a seed, so two rows share a stream with probability about ``B**2 / 2**33``. A single ``SamplingParams``
for the whole batch numbers its rows 0..B-1; a list with one ``SamplingParams`` per row treats each row
as its own request (index 0), so that row's output does not depend on where it sits in the batch.
``seed=None`` draws fresh entropy from the OS. :func:`row_seed` gives the seed of a one-row request that
draws exactly row ``i``'s stream of a request seeded ``s``: a batch split across workers (each row sent as
its own request, :mod:`trajkit.cluster.split`) samples what the whole batch would have.

Every sampler consumes a fixed number of uniforms per row per step (the plain sampler 1, the
speculative sampler ``2k + 1`` per round whatever the drafter), so a row's stream never depends on the
other rows. Up to floating-point differences between batched and unbatched matmuls, a row's completion
is a function of its own seed, prompt and index only.
"""
from __future__ import annotations

import secrets

import torch

_MASK = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """One SplitMix64 output for state ``x`` (a bijection on 64-bit integers)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def mix(seed: int, index: int) -> int:
    """63-bit seed of row ``index`` of a request seeded with ``seed``."""
    return splitmix64(splitmix64(seed & _MASK) ^ index) >> 1


def _unshift(y: int, shift: int) -> int:
    """The ``x`` with ``x ^ (x >> shift) == y`` (64-bit)."""
    x = y
    for _ in range(64 // shift + 1):
        x = y ^ (x >> shift)
    return x


def _unsplitmix64(y: int) -> int:
    """The inverse of :func:`splitmix64`: ``_unsplitmix64(splitmix64(x)) == x``."""
    x = _unshift(y, 31)
    x = (x * pow(0x94D049BB133111EB, -1, 1 << 64)) & _MASK
    x = _unshift(x, 27)
    x = (x * pow(0xBF58476D1CE4E5B9, -1, 1 << 64)) & _MASK
    x = _unshift(x, 30)
    return (x - 0x9E3779B97F4A7C15) & _MASK


def row_seed(seed: int, index: int) -> int:
    """The seed ``r`` with ``mix(r, 0) == mix(seed, index)``: row ``index`` of a request seeded ``seed``,
    sent alone (or in a per-row params list, where every row is index 0), draws the same stream.

    >>> all(mix(row_seed(s, i), 0) == mix(s, i) for s in (0, 7, 2**63 + 5) for i in (0, 1, 1000))
    True
    """
    return _unsplitmix64(splitmix64(seed & _MASK) ^ index)


def row_generator(seed: int | None, index: int) -> torch.Generator:
    """A CPU generator for row ``index`` of a request seeded with ``seed`` (None = OS entropy)."""
    g = torch.Generator(device="cpu")
    g.manual_seed(mix(seed if seed is not None else secrets.randbits(64), index))
    return g


class RowStreams:
    """One generator per row; ``uniform(rows, n)`` draws ``[len(rows), n]`` float64 in [0, 1)."""

    def __init__(self, seeds: list[int | None], indices: list[int], device: torch.device | str = "cpu"):
        assert len(seeds) == len(indices)
        self.generators = [row_generator(s, i) for s, i in zip(seeds, indices)]
        self.device = device

    def add(self, seeds: list[int | None], indices: list[int]) -> None:
        """Streams for rows appended to the batch (they get the next row ids)."""
        assert len(seeds) == len(indices)
        self.generators += [row_generator(s, i) for s, i in zip(seeds, indices)]

    def uniform(self, rows: list[int], n: int) -> torch.Tensor:
        """``rows``: original row ids of the active batch, in batch order -> ``[len(rows), n]`` float64."""
        out = torch.empty(len(rows), n, dtype=torch.float64)
        for j, r in enumerate(rows):
            torch.rand(n, generator=self.generators[r], dtype=torch.float64, out=out[j])
        return out.to(self.device, non_blocking=True)
