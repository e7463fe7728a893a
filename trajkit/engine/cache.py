"""KV storage for the engine: a transformers ``DynamicCache`` whose layers write into preallocated
buffers instead of concatenating.

transformers' ``DynamicLayer.update`` does ``torch.cat([keys, new])`` at every step, copying the whole
cache (measured: ~20% of a batch-8 decode step of the tiny target on this CPU). ``SlotLayer`` keeps a
``[B, H, capacity, D]`` buffer that doubles when full, writes new states in place, and hands the model
views ``buffer[:, :, :length]``; ``crop`` only moves the length. It is a drop-in ``DynamicLayer``
(same mask sizes, same ``crop`` / ``batch_select_indices`` contract), so any model that accepts a
``DynamicCache`` accepts it. ``select_slots`` gathers slots per row (used by ``KVState.compact``).
"""
from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from trajkit.errors import ConfigError


class SlotLayer(DynamicLayer):
    """A full-attention cache layer over preallocated, doubling buffers."""

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._k = self._v = None
        self._len = 0

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        """Append ``[B, H, T, D]`` states; returns views of all ``length + T`` slots."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        need = self._len + key_states.shape[2]
        if self._k is None or need > self._k.shape[2]:
            self._grow(key_states, value_states, need)
        self._k[:, :, self._len:need] = key_states
        self._v[:, :, self._len:need] = value_states
        self._len = need
        self._expose()
        return self.keys, self.values

    def _grow(self, key_states: torch.Tensor, value_states: torch.Tensor, need: int) -> None:
        capacity = max(need + 64, 2 * (self._k.shape[2] if self._k is not None else 0))
        k = key_states.new_empty(*key_states.shape[:2], capacity, key_states.shape[3])
        v = value_states.new_empty(*value_states.shape[:2], capacity, value_states.shape[3])
        if self._len:
            k[:, :, :self._len] = self._k[:, :, :self._len]
            v[:, :, :self._len] = self._v[:, :, :self._len]
        self._k, self._v = k, v

    def _expose(self) -> None:
        self.keys, self.values = self._k[:, :, :self._len], self._v[:, :, :self._len]

    def load(self, keys: torch.Tensor, values: torch.Tensor, length: int) -> None:
        """Take ``keys``/``values: [B, H, capacity, D]`` as the buffers, the first ``length`` slots filled."""
        self.lazy_initialization(keys, values)
        self._k, self._v, self._len = keys, values, length
        self._expose()

    def get_seq_length(self) -> int:
        return self._len if self.is_initialized else 0

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError("crop takes a negative number of tokens to remove")
        if tokens_to_remove and self.is_initialized and self._k is not None:
            self._len = max(0, self._len + tokens_to_remove)
            self._expose()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized and self._k is not None:
            self._k, self._v = self._k[indices], self._v[indices]
            self._expose()

    def select_slots(self, order: torch.Tensor) -> None:
        """Keep, per row, the slots ``order: [B, S']`` (in that order); the length becomes ``S'``."""
        if not (self.is_initialized and self._k is not None):
            return
        idx = order[:, None, :, None]
        self._k = self.keys.gather(2, idx.expand(-1, self._k.shape[1], -1, self._k.shape[3]))
        self._v = self.values.gather(2, idx.expand(-1, self._v.shape[1], -1, self._v.shape[3]))
        self._len = order.shape[1]
        self._expose()


def stack_rows(top: SlotLayer, bottom: SlotLayer, width: int, rows: tuple[int, int] | None = None) -> None:
    """Put ``bottom``'s rows under ``top``'s (batch axis), each right-aligned in ``width`` slots; the
    slots left of a row's states are zeros (holes the caller masks; zeros, not garbage, so that a masked
    slot's weight of 0 never meets a NaN). ``rows``: (top's, bottom's) row counts, needed when a side has
    run no forward yet (every prompt of a speculative prefill was one token: nothing cached)."""
    ready = [x for x in (top, bottom) if x.is_initialized and x._k is not None]
    if len(ready) < 2:
        if not ready:
            return  # neither side holds a state: the merged rows are all holes so far
        assert rows is not None, "stack_rows: a side without states needs the row counts"
        ref = ready[0].keys
        for layer, n in ((top, rows[0]), (bottom, rows[1])):
            if layer not in ready:
                empty = ref.new_zeros(n, ref.shape[1], 0, ref.shape[3])
                layer.lazy_initialization(empty, empty)
                layer._k, layer._v, layer._len = empty, empty.clone(), 0
                layer._expose()
    a, b = top.keys.shape, bottom.keys.shape  # [B, H, S, D]
    assert a[1:2] + a[3:] == b[1:2] + b[3:] and max(a[2], b[2]) <= width, (a, b, width)
    k = top.keys.new_zeros(a[0] + b[0], a[1], width + 64, a[3])
    v = top.values.new_zeros(a[0] + b[0], a[1], width + 64, top.values.shape[3])
    k[:a[0], :, width - a[2]:width], v[:a[0], :, width - a[2]:width] = top.keys, top.values
    k[a[0]:, :, width - b[2]:width], v[a[0]:, :, width - b[2]:width] = bottom.keys, bottom.values
    top._k, top._v, top._len = k, v, width
    top._expose()


def new_cache(model) -> DynamicCache:
    """A cache for ``model`` made of ``SlotLayer``s; ConfigError unless every layer is full attention."""
    cache = DynamicCache(config=model.config)
    bad = [type(layer).__name__ for layer in cache.layers if type(layer) is not DynamicLayer]
    if bad:
        raise ConfigError(f"model: trajkit.engine needs full-attention layers it can roll back; this model "
                          f"has {sorted(set(bad))} cache layers (sliding-window or recurrent attention)")
    n = len(cache.layers) or model.config.get_text_config(decoder=True).num_hidden_layers
    cache.layers = [SlotLayer() for _ in range(n)]
    return cache
