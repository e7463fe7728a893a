"""Batched lossless speculative sampling with per-row acceptance and per-row cache rollback.

Loop (Leviathan et al. 2023; Chen et al. 2023), for all active rows at once:

1. the target's cache holds every token of the row but the last (the prefill takes each prompt but its
   last token, so the first token is speculated too); the drafter proposes up to ``k`` tokens per row
   (clipped so no row drafts past its budget);
2. one target forward over ``[last, d_1..d_w]`` (``w`` = the longest proposal this round) gives
   ``p_1..p_{w+1}``, warped with each row's parameters;
3. :func:`trajkit.engine.kernel.verify_drafts` accepts ``n_b`` drafts per row and draws the next token;
4. the target cache is rolled back per row to ``old + 1 + n_b`` tokens (``KVState.truncate``: holes for
   rows that kept fewer, an exact crop at batch size 1); finished rows leave the batch, the cache and the
   drafter at once (:class:`trajkit.engine.active.ActiveBatch`); the drafter re-syncs itself from the
   sequences.

Each row draws ``2k + 1`` uniforms per round from its own stream whatever happens (k for the drafter, k
for the accept tests, 1 for the final token), so its randomness does not depend on the other rows.

Deviation from the papers: rows are not padded to ``k`` drafts when the drafter has fewer (n-gram misses)
or the budget is nearly spent; the verification width is the longest proposal of the round, and a round
where nobody drafts is a plain decoding step.
"""
from __future__ import annotations

import time

import torch

from trajkit.engine.active import ActiveBatch
from trajkit.engine.drafters import Drafter
from trajkit.engine.kernel import emitted_tokens, verify_drafts
from trajkit.engine.kvstate import KVState
from trajkit.engine.params import SamplingParams
from trajkit.engine.types import Completion, GenerationStats
from trajkit.engine.warp import token_logprobs


@torch.inference_mode()
def generate_speculative(model, drafter: Drafter, k: int, prompts: list[list[int]],
                         params: list[SamplingParams], shared_params: bool, sync_timing: bool = False
                         ) -> tuple[list[Completion], GenerationStats]:
    """Speculative sampling of ``prompts``; outputs are distributed exactly as ``generate_plain``'s."""
    start = time.perf_counter()
    draft_calls0, draft_seconds0 = drafter.calls, drafter.seconds
    state = KVState(model, sync_timing)
    batch = ActiveBatch(prompts, params, shared_params, state.device, followers=[state, drafter])
    state.prefill([p[:-1] for p in prompts])  # the last prompt token is scored with the first drafts
    drafter.begin(prompts)
    stats = GenerationStats(num_draft_tokens=k, rows=len(prompts), position_tried=[0] * k,
                            position_accepted=[0] * k)
    while batch.rows:
        _round(state, drafter, batch, k, stats)
    stats.new_tokens, stats.target_calls = batch.new_tokens, state.calls
    stats.draft_calls, stats.target_seconds = drafter.calls - draft_calls0, state.seconds
    stats.draft_seconds = drafter.seconds - draft_seconds0
    stats.seconds = time.perf_counter() - start
    return batch.completions(), stats


def _round(state: KVState, drafter: Drafter, batch: ActiveBatch, k: int, stats: GenerationStats) -> None:
    """One draft / verify / accept round over the active rows."""
    seqs = batch.active_seqs()
    u = batch.uniforms(2 * k + 1)  # [B, 2k+1]
    proposal = drafter.propose(seqs, k, batch.warp, u[:, :k])
    room = batch.remaining()
    lengths_list = [min(n, r - 1) for n, r in zip(proposal.lengths.tolist(), room)]  # no drafts past budget
    lengths = torch.tensor(lengths_list, dtype=torch.long, device=state.device)  # [B]
    width = max(lengths_list)
    draft = proposal.tokens[:, :width]  # [B, w]
    last = torch.tensor([s[-1] for s in seqs], dtype=torch.long, device=state.device)
    p = batch.probs(state.extend(torch.cat([last.unsqueeze(1), draft], dim=1)))  # [B, w+1, V]
    q = proposal.probs[:, :width] if proposal.probs is not None else None
    n_acc, nxt, overlap = verify_drafts(p, draft, q, lengths, u[:, k:k + width], u[:, 2 * k])
    emitted = emitted_tokens(draft, n_acc, nxt)  # [B, w+1]
    logprobs = token_logprobs(p, emitted)  # [B, w+1]
    state.truncate(state.lengths - width + n_acc)  # keep old + last + accepted drafts
    counts = n_acc.tolist()
    stats.add_round(lengths_list, counts, overlap.tolist())
    batch.count_drafts(lengths_list, counts)
    batch.drop(batch.emit([t[:m + 1] for t, m in zip(emitted.tolist(), counts)],
                          [x[:m + 1] for x, m in zip(logprobs.tolist(), counts)]))
