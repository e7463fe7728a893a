"""Per-row sampling state of the active batch: warping parameters as tensors and the random streams."""
from __future__ import annotations

import torch

from trajkit.engine.params import SamplingParams
from trajkit.engine.rng import RowStreams
from trajkit.engine.warp import row_params, warp_probs


class BatchSampling:
    """Warping tensors ``[B]`` for the active rows (kept in step with ``RowBook.active``) + row streams."""

    def __init__(self, params: list[SamplingParams], shared: bool, device):
        self.temperature, self.top_k, self.top_p = row_params(
            [p.temperature for p in params], [p.top_k for p in params], [p.top_p for p in params], device)
        self.filtered = any(p.top_k > 0 or p.top_p < 1.0 for p in params)
        self.any_greedy = any(p.greedy for p in params)
        indices = list(range(len(params))) if shared else [0] * len(params)
        self.streams = RowStreams([p.seed for p in params], indices, device)
        self._repeated: dict[int, tuple] = {}  # t -> parameters repeated t times (cache)

    def select(self, keep: torch.Tensor) -> None:
        """Keep batch positions ``keep: [B']``."""
        self.temperature, self.top_k, self.top_p = (
            self.temperature[keep], self.top_k[keep], self.top_p[keep])
        self._repeated = {}

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """``logits: [B, T, V]`` -> post-warping ``probs: [B, T, V]`` (row b's parameters on all T)."""
        b, t, v = logits.shape
        assert b == self.temperature.shape[0], (logits.shape, self.temperature.shape)
        if t == 1:
            return warp_probs(logits[:, 0], self.temperature, self.top_k, self.top_p,
                              filtered=self.filtered, any_greedy=self.any_greedy).unsqueeze(1)
        if t not in self._repeated:
            self._repeated[t] = tuple(x.repeat_interleave(t) for x in (self.temperature, self.top_k, self.top_p))
        flat = warp_probs(logits.reshape(b * t, v), *self._repeated[t], filtered=self.filtered,
                          any_greedy=self.any_greedy)
        return flat.view(b, t, v)
