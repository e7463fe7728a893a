"""Batched lossless speculative sampling with per-row acceptance and per-row cache rollback.

Loop (Leviathan et al. 2023; Chen et al. 2023), for all active rows at once. The target's cache holds
every token of a row but the last (the prefill takes each prompt but its last token, so the first token
is speculated too). Each round is three steps:

1. :func:`draft`: the drafter proposes up to ``k`` tokens per row, clipped so that no row drafts past
   its budget;
2. :func:`verify`: one target forward over ``[last, d_1..d_w]`` (``w`` = the longest proposal this round)
   gives ``p_1..p_{w+1}``, warped with each row's parameters;
   :func:`trajkit.engine.kernel.verify_drafts` accepts ``n_b`` drafts per row and draws the next token;
3. :func:`commit`: the target cache is rolled back per row to ``old + 1 + n_b`` tokens
   (``KVState.keep_appended``: holes for rows that kept fewer, an exact crop at batch size 1), the
   emitted tokens are appended to the rows, and finished rows leave the batch, the cache and the drafter
   at once (:class:`trajkit.engine.active.ActiveBatch`). The drafter re-syncs itself from the sequences
   at its next proposal.

Each row draws ``2k + 1`` uniforms per round from its own stream whatever happens (:class:`RoundUniforms`:
k for the drafter, k for the accept tests, 1 for the final token), so its randomness does not depend on
the other rows.

Host synchronisations per round, outside the drafter: two. ``draft`` reads the proposal lengths (the
verification width must be known on the host), and ``commit`` reads the accepted counts, emitted tokens,
their logprobs and the overlaps in one transfer. The uniforms and, in rounds where a budget clips a
proposal, the clipped lengths go to the device without blocking; a round in which some rows finish while
others go on adds the cache's compaction check (one or two reads). ``EngineConfig(sync_timing=True)``
adds one per target forward. The drafter adds its own (``DraftModel``: three reads and one blocking copy
per proposal). ``tests/engine/test_host_syncs.py`` counts them.

Deviation from the papers: rows are not padded to ``k`` drafts when the drafter has fewer (n-gram misses)
or the budget is nearly spent; the verification width is the longest proposal of the round, and a round
where nobody drafts is a plain decoding step.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from trajkit.engine.active import ActiveBatch
from trajkit.engine.drafters import Drafter
from trajkit.engine.features import feature_layers, observe_prefill, observe_round
from trajkit.engine.host import to_device, to_host
from trajkit.engine.kernel import emitted_tokens, verify_drafts
from trajkit.engine.kvstate import KVState
from trajkit.engine.prefix import Reuse
from trajkit.engine.params import SamplingParams
from trajkit.engine.types import Completion, GenerationStats
from trajkit.engine.warp import nonfinite_rows, token_logprobs, top_logprobs


@dataclass(frozen=True)
class RoundUniforms:
    """One round's uniforms, drawn as ``[B, 2k + 1]`` per row stream: ``draft: [B, k]`` for the drafter's
    samples, ``accept: [B, k]`` for the accept tests, ``final: [B]`` for the resampled or bonus token."""

    draft: torch.Tensor
    accept: torch.Tensor
    final: torch.Tensor

    @classmethod
    def draw(cls, batch: ActiveBatch, k: int) -> RoundUniforms:
        u = batch.uniforms(2 * k + 1)  # [B, 2k+1]
        return cls(draft=u[:, :k], accept=u[:, k:2 * k], final=u[:, 2 * k])


@dataclass(frozen=True)
class Drafts:
    """The round's proposal clipped to the budgets: ``tokens: [B, w]``, ``probs: [B, w, V]`` or None
    (one-hot proposals), ``lengths: [B]`` long on the device, and the same lengths on the host."""

    tokens: torch.Tensor
    probs: torch.Tensor | None
    lengths: torch.Tensor
    counts: list[int]

    @property
    def width(self) -> int:
        return self.tokens.shape[1]


@dataclass(frozen=True)
class Verdict:
    """The target's answer: ``accepted: [B]`` drafts kept per row, ``emitted: [B, w+1]`` (row b's first
    ``accepted[b] + 1`` entries are its new tokens), their ``logprobs: [B, w+1]`` under the warped target,
    ``overlap: [B, w]`` = ``sum_v min(p, q)`` per draft position, ``next_token: [B]`` (the last new token)."""

    accepted: torch.Tensor
    emitted: torch.Tensor
    logprobs: torch.Tensor
    overlap: torch.Tensor
    next_token: torch.Tensor
    nonfinite: torch.Tensor  # [B, w+1] bool: the target's logits at that position were NaN/inf
    top: tuple[torch.Tensor, torch.Tensor] | None = None  # ([B, w+1, k] log p, ids) when a row asked for them


@torch.inference_mode()
def generate_speculative(model, drafter: Drafter, k: int, prompts: list[list[int]],
                         params: list[SamplingParams], shared_params: bool, sync_timing: bool = False,
                         reuse: Reuse = Reuse(), decode=None) -> tuple[list[Completion], GenerationStats]:
    """Speculative sampling of ``prompts``; outputs are distributed exactly as ``generate_plain``'s."""
    start = time.perf_counter()
    draft_calls0, draft_seconds0 = drafter.calls, drafter.seconds
    state = KVState(model, sync_timing, capture=feature_layers(drafter))
    batch = ActiveBatch(prompts, params, shared_params, state.device, followers=[state, drafter], decode=decode)
    reuse.attach(batch, lambda: state)
    stats = GenerationStats(num_draft_tokens=k, rows=len(prompts), position_tried=[0] * k,
                            position_accepted=[0] * k)
    _, batch.cached = reuse.prefill(state, [p[:-1] for p in prompts], 0, stats)  # the last prompt token is scored with the first drafts
    batch.last = to_device([p[-1] for p in prompts], state.device)
    drafter.begin(prompts)
    observe_prefill(drafter, state, [p[:-1] for p in prompts])
    while batch.rows:
        u = RoundUniforms.draw(batch, k)
        drafts = draft(drafter, batch, k, u.draft)
        commit(state, batch, drafts, verify(state, batch, drafts, u), stats, drafter)
    stats.new_tokens, stats.target_calls = batch.new_tokens, state.calls
    stats.draft_calls, stats.target_seconds = drafter.calls - draft_calls0, state.seconds
    stats.draft_seconds = drafter.seconds - draft_seconds0
    stats.seconds = time.perf_counter() - start
    return batch.completions(), stats


def draft(drafter: Drafter, batch: ActiveBatch, k: int, u: torch.Tensor) -> Drafts:
    """Propose up to ``k`` tokens per active row (``u: [B, k]``), none past a row's budget."""
    proposal = drafter.propose(batch.active_seqs(), k, batch.warp, u)
    proposed = proposal.lengths.tolist()  # host sync: the verification width decides the forward's shape
    counts = [min(n, r - 1) for n, r in zip(proposed, batch.remaining())]  # room for the final token
    lengths = proposal.lengths.to(batch.device, torch.long)  # [B]
    if counts != proposed:  # a budget clipped some row (its last rounds only)
        lengths = to_device(counts, batch.device)
    width = max(counts)
    probs = proposal.probs[:, :width] if proposal.probs is not None else None
    return Drafts(proposal.tokens[:, :width], probs, lengths, counts)


def verify(state: KVState, batch: ActiveBatch, drafts: Drafts, u: RoundUniforms) -> Verdict:
    """Score ``[last, drafts]`` with the target (appending them to its cache) and accept / resample."""
    logits = state.extend(torch.cat([batch.last.unsqueeze(1), drafts.tokens], dim=1))  # [B, w+1, V]
    p = batch.probs(logits)
    n_acc, nxt, overlap = verify_drafts(p, drafts.tokens, drafts.probs, drafts.lengths,
                                        u.accept[:, :drafts.width], u.final)
    emitted = emitted_tokens(drafts.tokens, n_acc, nxt)  # [B, w+1]
    k = batch.top_count()
    return Verdict(n_acc, emitted, token_logprobs(p, emitted), overlap, nxt, nonfinite_rows(logits),
                   top_logprobs(p, k) if k else None)


def commit(state: KVState, batch: ActiveBatch, drafts: Drafts, verdict: Verdict,
           stats: GenerationStats, drafter: Drafter | None = None) -> list[bool]:
    """Keep the accepted drafts in the cache, append the new tokens to the rows, count the round and
    drop the finished rows; returns which of the round's rows (batch order) finished. A ``drafter`` that
    drafts from the target's features gets those of the kept tokens (:mod:`trajkit.engine.features`)."""
    counts, emitted, logprobs, overlap, bad, *top = to_host(
        verdict.accepted, verdict.emitted, verdict.logprobs, verdict.overlap, verdict.nonfinite,
        *(verdict.top or ()))  # second host sync
    batch.check_finite(bad, [n + 1 for n in drafts.counts])
    state.keep_appended(drafts.width + 1, [n + 1 for n in counts])  # last + accepted drafts
    observe_round(drafter, state, [n + 1 for n in counts])
    stats.add_round(drafts.counts, counts, overlap)
    batch.count_drafts(drafts.counts, counts)
    batch.last = verdict.next_token  # rows that go on emitted all their tokens: next_token is their last
    done = batch.emit([t[:m + 1] for t, m in zip(emitted, counts)], [x[:m + 1] for x, m in zip(logprobs, counts)],
                      (top[0], top[1]) if top else None)
    batch.drop(done)
    return done
