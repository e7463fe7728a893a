"""Samples -> padded tensors, and the policy's per-token log-probs over them.

Every sample becomes one right-padded row ``input_ids: [B, L]`` (prompt then completion). Log-probs
live in next-token space, ``[B, L-1]``: entry ``t`` is ``log p(input_ids[t+1] | input_ids[:t+1])``, so
completion token ``i`` of row ``b`` sits at ``P_b - 1 + i`` (``P_b`` the prompt length). ``mask`` is 1
exactly at the sampled completion tokens (``Sample.loss_mask``) and 0 at prompt, forced and padding
positions; ``engine_logp`` holds the engine's log-probs there.

Log-probs are taken from ``log_softmax(logits / temperature)``: the distribution the engine samples from
when top-k and top-p are off (the RL trainer requires that, so the two are comparable). Forwards run
under autocast in ``dtype`` when it is not float32 (:mod:`trajkit.rl.precision`); the log-softmax is
always taken in float32. Micro-batches take rows longest first (:func:`length_chunks`: less padding); the
output layer runs from the batch's first scored column on (:meth:`Batch.first_scored`) and the rows' shared
prefix once (:mod:`trajkit.rl.shared_prefix`), and where it costs less the rows run packed into one sequence
without padding (:mod:`trajkit.rl.packed`): the same values as one dense forward per row, to float32
rounding (tested). ``collate`` builds the batch on the CPU; ``Batch.to`` moves it to the policy's
device, and every tensor computed from it stays there.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from trajkit.engine.kvstate import forward_keywords
from trajkit.models.logprobs import chunked_logprobs
from trajkit.rl import packed, shared_prefix
from trajkit.rl.precision import autocast, model_device
from trajkit.rl.shared_prefix import can_share, shared_prefix_logits, usable_prefix
from trajkit.envs.sample import Sample


@dataclass
class Batch:
    """``input_ids, attention: [B, L]``; ``mask, engine_logp: [B, L-1]``; ``advantages: [B]``, or per token
    ``[B, L-1]`` (set by on-policy distillation in the ``logprob`` stage, :mod:`trajkit.rl.distill`)."""

    input_ids: torch.Tensor
    attention: torch.Tensor
    mask: torch.Tensor
    engine_logp: torch.Tensor
    advantages: torch.Tensor
    lengths: torch.Tensor  # [B] real tokens per row
    # ``[N, V]``: the teacher's log-distribution at each of the N positions where ``mask`` is 1, in row-major
    # order (set by on-policy distillation with a whole-vocabulary divergence, :mod:`trajkit.rl.distill`)
    teacher_dists: torch.Tensor | None = None

    def select(self, rows: torch.Tensor) -> "Batch":
        """Rows ``rows`` only, trimmed to their longest sequence."""
        width = int(self.lengths[rows].max())
        adv = self.advantages[rows] if self.advantages.dim() == 1 else self.advantages[rows, :width - 1]
        return Batch(self.input_ids[rows, :width], self.attention[rows, :width], self.mask[rows, :width - 1],
                     self.engine_logp[rows, :width - 1], adv, self.lengths[rows], self._teacher_rows(rows))

    def _teacher_rows(self, rows: torch.Tensor) -> torch.Tensor | None:
        """The segments of :attr:`teacher_dists` that belong to ``rows``, in that order (None without them)."""
        if self.teacher_dists is None:
            return None
        counts = (self.mask > 0).sum(1).tolist()
        offsets = [0]
        for c in counts:
            offsets.append(offsets[-1] + c)
        return torch.cat([self.teacher_dists[offsets[r]:offsets[r + 1]] for r in rows.tolist()])

    def first_scored(self) -> int:
        """The first next-token column where any row's ``mask`` is 1 (0 for an all-zero mask). Every reader
        of a batch's log-probs (the losses, ECHO's forced tokens after the first sampled one, the mismatch
        metrics, distillation) reads masked columns or later ones, so the columns before it, the shared
        prompt positions, need no output layer (:func:`token_logprobs`)."""
        return first_scored(self.mask)

    def to(self, device) -> "Batch":
        """The same batch with every tensor on ``device`` (``lengths`` stays on the CPU: it sizes slices)."""
        dists = self.teacher_dists.to(device) if self.teacher_dists is not None else None
        return Batch(self.input_ids.to(device), self.attention.to(device), self.mask.to(device),
                     self.engine_logp.to(device), self.advantages.to(device), self.lengths, dists)


def collate(samples: list[Sample], advantages: torch.Tensor, pad_id: int) -> Batch:
    """Right-pad ``samples`` into a :class:`Batch`; ``advantages: [B]``."""
    assert advantages.shape == (len(samples),)
    width = max(len(s.prompt_ids) + len(s.completion_ids) for s in samples)
    b = len(samples)
    ids = torch.full((b, width), pad_id, dtype=torch.long)
    attention = torch.zeros(b, width, dtype=torch.long)
    mask = torch.zeros(b, width - 1)
    engine = torch.zeros(b, width - 1)
    for i, s in enumerate(samples):
        p, c = len(s.prompt_ids), len(s.completion_ids)
        ids[i, :p + c] = torch.tensor(s.ids, dtype=torch.long)
        attention[i, :p + c] = 1
        mask[i, p - 1:p - 1 + c] = torch.tensor(s.loss_mask, dtype=torch.float32)
        engine[i, p - 1:p - 1 + c] = torch.tensor(s.logprobs, dtype=torch.float32)
    lengths = attention.sum(1)
    return Batch(ids, attention, mask, engine, advantages.to(torch.float32), lengths)


def forward_logits(model, batch: Batch, dtype: torch.dtype = torch.float32,
                   feature_layers: tuple[int, ...] | None = None, start: int = 0):
    """``[B, L-1, V]`` float32 next-token logits of ``model`` over ``batch``, its forward autocast to ``dtype``;
    with ``feature_layers``, (logits, those hidden states concatenated ``[B, L, F]`` float32) from the same
    forward. ``start`` > 0: the output layer runs on positions ``start..L-2`` only (the model's
    ``logits_to_keep``), giving ``[B, L-1-start, V]``, and the rows' shared prefix runs once
    (:mod:`trajkit.rl.shared_prefix`) when it is long enough (not with ``feature_layers``)."""
    if start and not feature_layers:
        keywords = forward_keywords(model)
        prefix = usable_prefix(batch.input_ids, batch.attention, start)
        if can_share(model, keywords, batch.input_ids.shape[0], prefix):
            with autocast(model_device(model), dtype):
                logits = shared_prefix_logits(model, batch.input_ids, batch.attention, prefix, start, keywords[0])
            return logits[:, :-1].float()
    extra = {"output_hidden_states": True} if feature_layers else {}
    if start:
        extra["logits_to_keep"] = batch.input_ids.shape[1] - start
    with autocast(model_device(model), dtype):
        out = model(input_ids=batch.input_ids, attention_mask=batch.attention, **extra)
    logits = out.logits[:, :-1].float()
    if feature_layers is None:
        return logits
    return logits, torch.cat([out.hidden_states[i] for i in feature_layers], dim=-1).float()


def token_logprobs(model, batch: Batch, temperature: float, dtype: torch.dtype = torch.float32,
                   logits_chunk: int = 0) -> torch.Tensor:
    """``[B, L-1]`` log-probs of each next token of ``batch`` at ``temperature``; ``logits_chunk`` > 0 applies
    the output layer that many positions at a time (:func:`trajkit.models.logprobs.chunked_logprobs`).
    Without it, the output layer and log-softmax run from :meth:`Batch.first_scored` on only, the columns
    before it left 0 (for SmolLM2's chat prompts about half the positions, and of the ``[B, L, V]`` logits)."""
    if not logits_chunk:
        keywords = forward_keywords(model)
        start = batch.first_scored() if keywords[1] else 0
        got = _packed_logprobs(model, batch, temperature, dtype, start, keywords)
        if got is not None:
            return got[0]
        logits = forward_logits(model, batch, dtype, start=start)  # [B, L-1-start, V]
        lp = gather_logprobs(logits, batch.input_ids[:, start:], temperature)
        return torch.nn.functional.pad(lp, (start, 0)) if start else lp
    with autocast(model_device(model), dtype):
        return chunked_logprobs(model, batch.input_ids, batch.attention, temperature, logits_chunk)


def token_logprobs_and_dists(model, batch: Batch, temperature: float,
                             dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """(:func:`token_logprobs` ``[B, L-1]``, the log-distributions ``[N, V]`` at ``temperature`` at the N
    positions where ``batch.mask`` is 1, row-major) from one forward: what a whole-vocabulary divergence reads."""
    keywords = forward_keywords(model)
    start = batch.first_scored() if keywords[1] else 0
    got = _packed_logprobs(model, batch, temperature, dtype, start, keywords)
    if got is not None:
        lp, logp, rows, cols = got
        return lp, logp[batch.mask[rows, cols] > 0]
    logits = forward_logits(model, batch, dtype, start=start)  # [B, L-1-start, V]
    logp = torch.log_softmax(logits / temperature, dim=-1)
    lp = logp.gather(-1, batch.input_ids[:, start + 1:].unsqueeze(-1)).squeeze(-1)
    dists = logp[batch.mask[:, start:] > 0]
    return (torch.nn.functional.pad(lp, (start, 0)) if start else lp), dists


def first_scored(mask: torch.Tensor) -> int:
    """The first column of ``mask: [B, L-1]`` where any row is 1 (0 for an all-zero mask)."""
    scored = mask.any(0).nonzero()
    return int(scored[0]) if len(scored) else 0


def _packed_logprobs(model, batch: Batch, temperature: float, dtype: torch.dtype, start: int,
                     keywords: tuple[str, bool]):
    """The rows packed into one sequence (:mod:`trajkit.rl.packed`) where that applies -> (``[B, L-1]``
    log-probs, the ``[K, V]`` log-distributions at the scored positions, their rows and columns, ``[K]``
    each, row-major), else None."""
    packing = packed.plan(model, batch.input_ids, batch.attention, batch.lengths, start, keywords)
    if packing is None:
        return None
    with autocast(model_device(model), dtype):
        logits, rows, cols = packed.packed_logits(model, batch.input_ids, packing, start, keywords[0])
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    lp = logp.gather(-1, batch.input_ids[rows, cols + 1, None])[:, 0]
    return packed.scatter(lp, rows, cols, batch.mask.shape), logp, rows, cols


def gather_logprobs(logits: torch.Tensor, input_ids: torch.Tensor, temperature: float) -> torch.Tensor:
    """``logits: [B, L-1, V]``, ``input_ids: [B, L]`` -> ``log p(next token)`` ``[B, L-1]`` at ``temperature``."""
    assert logits.shape[:2] == (input_ids.shape[0], input_ids.shape[1] - 1)
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


def chunks(n: int, size: int) -> list[torch.Tensor]:
    """Row indices ``0..n-1`` in consecutive chunks of ``size``."""
    return [torch.arange(i, min(i + size, n)) for i in range(0, n, size)]


def length_chunks(rows: torch.Tensor, lengths: torch.Tensor, size: int) -> list[torch.Tensor]:
    """``rows`` (indices into a batch with ``lengths: [B]``) longest first, in chunks of ``size``: each
    micro-batch is trimmed to its longest row (:meth:`Batch.select`), so grouping rows of similar length
    cuts the padding a forward computes on. The rows' results are the same in any grouping (each row is
    scored alone; a loss normalised by the whole slice sums the same), up to floating-point order.

    >>> [c.tolist() for c in length_chunks(torch.arange(4), torch.tensor([3, 9, 5, 9]), 2)]
    [[1, 3], [2, 0]]
    """
    order = torch.sort(lengths[rows], descending=True, stable=True).indices
    ranked = rows[order]
    return [ranked[part] for part in chunks(len(ranked), size)]


def row_chunks(model, batch: Batch, rows: torch.Tensor, size: int) -> list[torch.Tensor]:
    """``rows`` in micro-batches of ``size``: longest first (:func:`length_chunks`), or the rows of one prompt
    together (:func:`prompt_chunks`) where that computes fewer positions. A GRPO group in one micro-batch shares
    its whole prompt, which runs once (:mod:`trajkit.rl.shared_prefix`); rows of several prompts share only the
    chat template's start and each carries the rest of its prompt (SmolLM2's arithmetic task: 27 of 44 prompt
    tokens shared across prompts, so 17 more per row). Positions are counted as the forward computes them:
    packed where the model packs (:mod:`trajkit.rl.packed`), else padded after the shared prefix."""
    by_length = length_chunks(rows, batch.lengths, size)
    if len(rows) <= size:
        return by_length  # one micro-batch either way
    by_prompt = prompt_chunks(rows, batch, size)
    keywords = forward_keywords(model)
    shares = can_share(model, keywords, 2, shared_prefix.MIN_PREFIX)
    packs = shares and packed.ENABLED and packed.packable(model, keywords)
    if positions(batch, by_prompt, shares, packs) < positions(batch, by_length, shares, packs):
        return by_prompt
    return by_length


def prompt_chunks(rows: torch.Tensor, batch: Batch, size: int) -> list[torch.Tensor]:
    """``rows`` grouped by their prompt (the tokens before a row's first scored one; prompts in the order they
    first appear), each group longest first, in chunks of ``size``.

    >>> b = collate([Sample([1, 2], [3], [0.0], [1]), Sample([1, 4], [3, 3], [0.0] * 2, [1] * 2),
    ...              Sample([1, 2], [5, 6], [0.0] * 2, [1] * 2)], torch.zeros(3), pad_id=0)
    >>> [c.tolist() for c in prompt_chunks(torch.arange(3), b, 2)]
    [[2, 0], [1]]
    """
    groups: dict[tuple, list[int]] = {}
    for r in rows.tolist():
        scored = batch.mask[r].nonzero()
        end = int(scored[0]) + 1 if len(scored) else int(batch.lengths[r])
        groups.setdefault(tuple(batch.input_ids[r, :end].tolist()), []).append(r)
    order = [r for members in groups.values()
             for r in sorted(members, key=lambda r: -int(batch.lengths[r]))]  # sorted is stable: ties keep order
    ranked = torch.tensor(order, dtype=rows.dtype)
    return [ranked[part] for part in chunks(len(ranked), size)]


def positions(batch: Batch, parts: list[torch.Tensor], shares: bool, packs: bool) -> int:
    """The positions the forwards of micro-batches ``parts`` compute: a shared prefix (``shares``) once, then
    each row's tokens after it, packed (``packs``, where fewer) or padded to the micro-batch's longest row."""
    total = 0
    for part in parts:
        lens = batch.lengths[part]
        width = int(lens.max())
        prefix = 0
        if shares and len(part) > 1:
            prefix = usable_prefix(batch.input_ids[part, :width], batch.attention[part, :width],
                                   first_scored(batch.mask[part]))
        padded = prefix + len(part) * (width - prefix)
        total += min(padded, prefix + int(lens.sum()) - len(part) * prefix) if packs else padded
    return total


@torch.no_grad()
def batch_logprobs(model, batch: Batch, temperature: float, micro_batch_size: int,
                   keep_dists: bool = False, dtype: torch.dtype = torch.float32, logits_chunk: int = 0,
                   feature_layers: tuple[int, ...] | None = None):
    """Policy log-probs ``[B, L-1]`` (zeros past each row's end) and, with ``keep_dists``, the full
    log-distributions ``[B, L-1, V]`` at ``temperature`` (targets for draft distillation); one forward
    per ``micro_batch_size`` rows, autocast to ``dtype``; ``logits_chunk``: see :func:`token_logprobs`
    (not with ``keep_dists``, which needs every distribution). ``feature_layers`` (with ``keep_dists``):
    the same forward also returns those hidden states, concatenated, ``[B, L, F]`` float32 (an EAGLE
    head's inputs), as a third value."""
    b, width = batch.input_ids.shape
    device = batch.input_ids.device
    out = torch.zeros(b, width - 1, device=device)
    dists = feats = None
    for rows in row_chunks(model, batch, torch.arange(b), micro_batch_size):
        mb = batch.select(rows)
        if not keep_dists:
            lp = token_logprobs(model, mb, temperature, dtype, logits_chunk)
        else:
            logits, hidden = forward_logits(model, mb, dtype, feature_layers) if feature_layers \
                else (forward_logits(model, mb, dtype), None)
            lp = gather_logprobs(logits, mb.input_ids, temperature)
            if dists is None:
                dists = torch.zeros(b, width - 1, logits.shape[-1], device=device)
            dists[rows, :logits.shape[1]] = torch.log_softmax(logits / temperature, dim=-1)
            if hidden is not None:
                if feats is None:
                    feats = torch.zeros(b, width, hidden.shape[-1], device=device)
                feats[rows, :hidden.shape[1]] = hidden
        out[rows, :lp.shape[1]] = lp
    return (out, dists, feats) if feature_layers else (out, dists)
