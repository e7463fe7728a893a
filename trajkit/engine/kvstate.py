"""The KV cache of one causal LM over a batch of rows, with per-row lengths.

A transformers ``DynamicCache`` (with :class:`trajkit.engine.cache.SlotLayer` layers) stores
``[B, H, S, D]`` per layer: one slot axis shared by all rows.
Rows of different length, and rows that keep a different number of speculated tokens, are handled by
bookkeeping rather than by moving tensors:

- ``slots: [B, S]`` bool says which cache slots hold a real token of the row. It is the 2D attention
  mask given to the model, so a hole is never attended to. Ragged prompts are left-padded (holes on the
  left); a rollback after speculation leaves holes on the right of the rows that kept fewer tokens.
- ``lengths: [B]`` is the number of real tokens per row; the next token of row ``b`` gets position id
  ``lengths[b]`` (explicit ``position_ids``, so RoPE sees each row's true positions).
- ``truncate(new_lengths)`` is the per-row rollback: it clears the slots past each row's new length and
  crops the trailing columns no row uses any more (so at batch size 1 a rollback is an exact crop).
  ``keep_appended(appended, kept)`` is the same rollback of the last ``extend`` when the caller already
  holds the kept counts on the host (the speculative sampler): it needs no host synchronisation.
- ``retain(rows)`` drops finished rows; ``admit(other)`` appends the rows of another state (new rows
  prefilled on their own) between decode steps, for continuous batching; ``compact()`` squeezes the holes out when they exceed half the
  cache (one gather per layer).

Only full-attention caches are supported (``cache.new_cache`` checks): a sliding window or a recurrent
state cannot be rolled back by masking. transformers renamed ``past_key_values`` to ``cache``
during 5.x; the keyword is looked up from the model's ``forward`` signature.

``seconds`` is the host time spent in forward passes. On a GPU a forward returns once its kernels are
queued, so that is launch time, unless ``sync_timing=True`` makes each forward wait for the device (one
extra synchronisation per forward; :class:`trajkit.engine.EngineConfig` ``sync_timing``).
"""
from __future__ import annotations

import inspect
import time

import torch

from trajkit.engine.cache import new_cache, stack_rows
from trajkit.engine.host import to_device


def forward_keywords(model) -> tuple[str, bool]:
    """(name of the cache keyword, whether ``logits_to_keep`` is accepted) for ``model.forward``."""
    params = inspect.signature(model.forward).parameters
    cache_kw = "cache" if "cache" in params else "past_key_values"
    return cache_kw, "logits_to_keep" in params


class KVState:
    """One model's cache over the active rows. ``seconds`` and ``calls`` count its forward passes."""

    def __init__(self, model, sync_timing: bool = False, capture: tuple[int, ...] | None = None):
        self.model = model
        self.sync_timing = sync_timing
        # capture: indices of the model's hidden_states to keep from every forward, concatenated on the
        # last axis (an EAGLE head's features): ``features: [B, T, F]`` of the latest ``extend`` and its
        # ``feature_valid: [B, T]`` (None: every position real)
        self.capture = tuple(capture) if capture else None
        self.features: torch.Tensor | None = None
        self.feature_valid: torch.Tensor | None = None
        self.device = next(model.parameters()).device
        self.cache_kw, self.has_keep = forward_keywords(model)
        self.cache = new_cache(model)
        self.slots = torch.zeros(0, 0, dtype=torch.bool, device=self.device)  # [B, S]
        self.lengths = torch.zeros(0, dtype=torch.long, device=self.device)  # [B]
        self.dense = True  # no holes: every slot of every row is real (then no mask is needed)
        self.calls = 0
        self.seconds = 0.0

    @property
    def width(self) -> int:
        return self.slots.shape[1]

    def prefill(self, prompts: list[list[int]], pad_id: int = 0, keep_last: int = 1,
                share: bool = True) -> torch.Tensor | None:
        """Left-pad ``prompts`` into the (empty) cache -> logits of the last ``keep_last`` positions
        (None when every prompt is empty: nothing to run). ``share``: identical prompts (a GRPO group) are
        run once and their states copied to every row that repeats them (:meth:`expand`)."""
        unique, inverse = unique_rows(prompts) if share else (prompts, None)
        self.slots = torch.zeros(len(unique), 0, dtype=torch.bool, device=self.device)
        self.lengths = torch.zeros(len(unique), dtype=torch.long, device=self.device)
        self.dense = True
        self.features = self.feature_valid = None
        logits = None
        if any(unique):
            tokens, valid = left_pad(unique, pad_id, self.device)
            logits = self.extend(tokens, valid, keep_last=keep_last)
        return self.expand(inverse, logits)

    def resume(self, states: list[torch.Tensor | None], rests: list[list[int]], pad_id: int = 0,
               keep_last: int = 1) -> torch.Tensor | None:
        """Start the (empty) cache from stored prefixes, then prefill the rest of each row.

        ``states[b]``: row b's cached prefix ``[L, 2, H, n_b, D]`` (None: nothing cached), right-aligned in
        ``max(n_b)`` slots with holes on the left (zeros, masked), exactly like left padding; ``rests[b]``:
        the row's remaining ids, appended after (left-padded among themselves, so a row whose rest is
        shorter has holes between its prefix and its rest). -> logits as :meth:`prefill` (None when no
        row has a rest)."""
        hits = [0 if s is None else s.shape[3] for s in states]
        width, rows = max(hits), len(states)
        ref = next(s for s in states if s is not None)
        for i, layer in enumerate(self.cache.layers):
            k = ref.new_zeros(rows, ref.shape[2], width + 64, ref.shape[4])
            v = torch.zeros_like(k)
            for b, s in enumerate(states):
                if s is not None:
                    k[b, :, width - hits[b]:width], v[b, :, width - hits[b]:width] = s[i, 0], s[i, 1]
            layer.load(k, v, width)
        self.lengths = torch.tensor(hits, dtype=torch.long, device=self.device)
        self.slots = torch.arange(width, device=self.device).unsqueeze(0) >= (width - self.lengths).unsqueeze(1)
        self.dense = min(hits) == width
        self.features = self.feature_valid = None
        if not any(rests):
            return None
        tokens, valid = left_pad(rests, pad_id, self.device)
        return self.extend(tokens, valid, keep_last=keep_last)

    def expand(self, rows: list[int] | None, logits: torch.Tensor | None = None) -> torch.Tensor | None:
        """Repeat batch rows: row ``i`` becomes a copy of row ``rows[i]`` (cache, slots, lengths and the
        given ``logits``); None leaves everything as it is. Returns the logits, expanded."""
        if rows is None or rows == list(range(self.slots.shape[0])):
            return logits
        index = torch.tensor(rows, dtype=torch.long, device=self.device)
        self.cache.batch_select_indices(index)
        self.slots, self.lengths = self.slots[index], self.lengths[index]
        if self.features is not None:
            self.features = self.features[index]
            self.feature_valid = None if self.feature_valid is None else self.feature_valid[index]
        return None if logits is None else logits[index]

    def row_states(self, row: int, start: int, end: int) -> torch.Tensor:
        """States of row ``row``'s real tokens ``start:end`` (in order, holes skipped): ``[L, 2, H, n, D]``."""
        index = self.slots[row].nonzero().squeeze(1)[start:end]
        return torch.stack([torch.stack([layer.keys[row][:, index], layer.values[row][:, index]])
                            for layer in self.cache.layers])

    def extend(self, tokens: torch.Tensor, valid: torch.Tensor | None = None,
               keep_last: int = 0, **inputs) -> torch.Tensor:
        """Append ``tokens: [B, T]`` (``valid: [B, T]``, False = hole) -> logits ``[B, T or keep_last, V]``.
        ``inputs``: further model inputs (an EAGLE head's ``features``); with ``capture`` the forward also
        returns hidden states and ``features`` keeps the captured ones."""
        b, t = tokens.shape
        assert b == self.slots.shape[0], (tokens.shape, self.slots.shape)
        if valid is None:
            positions = self.lengths.unsqueeze(1) + torch.arange(t, device=self.device)
            added = torch.ones(b, t, dtype=torch.bool, device=self.device)
            counts = t
        else:
            assert valid.shape == tokens.shape
            positions = (self.lengths.unsqueeze(1) + valid.cumsum(1) - 1).clamp(min=0)
            added = valid
            counts = valid.sum(1)
            self.dense = self.dense and bool(valid.all())
        self.slots = torch.cat([self.slots, added], dim=1)
        kwargs = {self.cache_kw: self.cache, "use_cache": True}
        if keep_last and self.has_keep:
            kwargs["logits_to_keep"] = keep_last
        if self.capture:
            kwargs["output_hidden_states"] = True
        start = time.perf_counter()
        out = self.model(input_ids=tokens, attention_mask=None if self.dense else self.slots,
                         position_ids=positions, **kwargs, **inputs)
        logits = out.logits
        if self.capture:
            self.features = torch.cat([out.hidden_states[i] for i in self.capture], dim=-1)
            self.feature_valid = valid
        if self.sync_timing and logits.is_cuda:
            torch.cuda.synchronize(logits.device)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        self.lengths = self.lengths + counts
        return logits[:, -keep_last:] if keep_last else logits

    def truncate(self, lengths: torch.Tensor) -> None:
        """Per-row rollback: keep the first ``lengths[b]`` real tokens of each row (``lengths: [B]``)."""
        assert lengths.shape == self.lengths.shape
        if self.dense and (lengths.shape[0] == 1 or bool((lengths == lengths[0]).all())):
            keep = int(lengths[0])  # no holes and one length: an exact crop
        else:
            self.slots = self.slots & (self.slots.cumsum(1) <= lengths.unsqueeze(1))
            used = self.slots.any(0).nonzero()
            keep = int(used[-1]) + 1 if used.numel() else 0
            self.dense = False
        self.lengths = lengths.clone()
        if keep < self.width:
            self.cache.crop(keep - self.width)
            self.slots = self.slots[:, :keep]

    def keep_appended(self, appended: int, kept: list[int]) -> None:
        """Roll back the last ``extend``, which appended ``appended`` tokens to every row without holes, to
        its first ``kept[b]`` tokens per row (``1 <= kept[b] <= appended``). The same result as
        ``truncate(lengths - appended + kept)``, decided from the host-side ``kept``: no synchronisation."""
        assert len(kept) == self.lengths.shape[0] and 1 <= min(kept) and max(kept) <= appended <= self.width, \
            (kept, appended, self.width)
        lengths = self.lengths - appended + to_device(kept, self.device)
        if self.dense and min(kept) == max(kept):
            keep = self.width - appended + kept[0]  # no holes and one length: an exact crop
        else:
            self.slots = self.slots & (self.slots.cumsum(1) <= lengths.unsqueeze(1))
            keep = self.width - appended + max(kept)  # every row's kept tokens end by this column
            self.dense = False
        self.lengths = lengths
        if keep < self.width:
            self.cache.crop(keep - self.width)
            self.slots = self.slots[:, :keep]

    def admit(self, other: KVState) -> None:
        """Append ``other``'s rows (a fresh prefill of new rows) to this batch, between decode steps. Both
        caches are right-aligned to the wider one; the narrower rows get holes on the left, exactly like
        left padding, and keep their own ``lengths`` (so their position ids do not change)."""
        width = max(self.width, other.width)
        rows = (self.slots.shape[0], other.slots.shape[0])
        for top, bottom in zip(self.cache.layers, other.cache.layers):
            stack_rows(top, bottom, width, rows)
        self.dense = self.dense and other.dense and self.width == other.width
        self.slots = torch.cat([_pad_left(self.slots, width), _pad_left(other.slots, width)], dim=0)
        self.lengths = torch.cat([self.lengths, other.lengths])
        self.calls += other.calls
        self.seconds += other.seconds

    def retain(self, rows: torch.Tensor) -> None:
        """Keep only ``rows: [B']`` (indices into the current batch), then compact if worthwhile."""
        self.cache.batch_select_indices(rows)
        self.slots = self.slots[rows]
        self.lengths = self.lengths[rows]
        self.compact()

    def compact(self, min_waste: float = 0.5) -> bool:
        """Gather each row's real slots to the right when more than ``min_waste`` of the cache is holes."""
        if self.slots.numel() == 0:
            return False
        needed = int(self.lengths.max())
        if self.width - needed <= min_waste * self.width:
            return False
        # stable sort on the mask puts holes first and keeps the real slots in order: [B, S]
        order = torch.sort(self.slots.to(torch.int8), dim=1, stable=True).indices[:, self.width - needed:]
        for layer in self.cache.layers:
            layer.select_slots(order)
        self.slots = self.slots.gather(1, order)
        self.dense = bool(self.slots.all())
        return True


def unique_rows(rows: list[list[int]]) -> tuple[list[list[int]], list[int] | None]:
    """(the distinct rows in first-seen order, each row's index among them), or (rows, None) when all
    rows are distinct."""
    seen: dict[tuple[int, ...], int] = {}
    inverse = [seen.setdefault(tuple(r), len(seen)) for r in rows]
    if len(seen) == len(rows):
        return rows, None
    return [list(r) for r in seen], inverse


def _pad_left(mask: torch.Tensor, width: int) -> torch.Tensor:
    """``mask: [B, S]`` -> ``[B, width]`` with False (holes) on the left."""
    return torch.cat([mask.new_zeros(mask.shape[0], width - mask.shape[1]), mask], dim=1)


def left_pad(rows: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged ``rows`` -> (``tokens: [B, T]`` long, ``valid: [B, T]`` bool), padded on the left."""
    width = max(len(r) for r in rows)
    tokens = torch.tensor([[pad_id] * (width - len(r)) + r for r in rows], dtype=torch.long)
    valid = torch.tensor([[False] * (width - len(r)) + [True] * len(r) for r in rows], dtype=torch.bool)
    return tokens.to(device), valid.to(device)
