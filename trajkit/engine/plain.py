"""Plain batched sampling with a KV cache: one target forward per generated token.

Prefill the left-padded prompts, then repeat: warp the last logits per row, draw one token per row from
its own stream (inverse CDF, :mod:`trajkit.engine.warp`), record ``log p(token)``, drop the rows that hit
a stop token or their budget (:class:`trajkit.engine.active.ActiveBatch` drops them from the cache too),
and feed the new tokens. This is the reference the speculative sampler is tested against, and the
fallback when speculation would not pay.

Host synchronisations per step: one (the sampled tokens and their logprobs read in one transfer), plus,
in a step where some rows finish while others go on, the cache's compaction check (one or two reads).
"""
from __future__ import annotations

import time

import torch

from trajkit.engine.active import ActiveBatch
from trajkit.engine.host import to_host
from trajkit.engine.kvstate import KVState
from trajkit.engine.prefix import Reuse
from trajkit.engine.params import SamplingParams
from trajkit.engine.types import Completion, GenerationStats
from trajkit.engine.warp import nonfinite_rows, one_position, sample, token_logprobs, top_logprobs


@torch.inference_mode()
def generate_plain(model, prompts: list[list[int]], params: list[SamplingParams], shared_params: bool,
                   sync_timing: bool = False, reuse: Reuse = Reuse(), decode=None
                   ) -> tuple[list[Completion], GenerationStats]:
    """Sample completions of ``prompts`` from ``model``; see :class:`trajkit.engine.Engine`."""
    start = time.perf_counter()
    state = KVState(model, sync_timing)
    batch = ActiveBatch(prompts, params, shared_params, state.device, followers=[state], decode=decode)
    reuse.attach(batch, lambda: state)
    stats = GenerationStats(rows=len(prompts))
    logits, batch.cached = reuse.prefill(state, prompts, 1, stats)  # [B, 1, V]
    row_steps = 0
    while True:
        probs = batch.probs(logits)[:, 0]  # [B, V]
        batch.last = sample(probs, batch.uniforms(1)[:, 0])  # [B]
        k = batch.top_count()
        tokens, logprobs, bad, *top = to_host(batch.last, token_logprobs(probs, batch.last),
                                              nonfinite_rows(logits[:, 0]),
                                              *(top_logprobs(probs, k) if k else ()))  # the step's one sync
        batch.check_finite(bad)
        batch.drop(batch.emit([[t] for t in tokens], [[x] for x in logprobs], one_position(top)))
        if not batch.rows:
            break
        row_steps += len(batch.rows)
        logits = state.extend(batch.last.unsqueeze(1))  # [B, 1, V]
    stats.new_tokens, stats.target_calls, stats.row_steps, stats.step_tokens = \
        batch.new_tokens, state.calls, row_steps, row_steps
    stats.target_seconds, stats.seconds = state.seconds, time.perf_counter() - start
    return batch.completions(), stats
