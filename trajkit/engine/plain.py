"""Plain batched sampling with a KV cache: one target forward per generated token.

Prefill the left-padded prompts, then repeat: warp the last logits per row, draw one token per row from
its own stream (inverse CDF, :mod:`trajkit.engine.warp`), record ``log p(token)``, drop the rows that hit
a stop token or their budget, and feed the new tokens. This is the reference the speculative sampler is
tested against, and the fallback when speculation would not pay.
"""
from __future__ import annotations

import time

import torch

from trajkit.engine.batch import BatchSampling
from trajkit.engine.kvstate import KVState
from trajkit.engine.params import SamplingParams
from trajkit.engine.rows import RowBook
from trajkit.engine.types import Completion, GenerationStats
from trajkit.engine.warp import sample, token_logprobs


@torch.inference_mode()
def generate_plain(model, prompts: list[list[int]], params: list[SamplingParams], shared_params: bool,
                   sync_timing: bool = False) -> tuple[list[Completion], GenerationStats]:
    """Sample completions of ``prompts`` from ``model``; see :class:`trajkit.engine.Engine`."""
    start = time.perf_counter()
    state = KVState(model, sync_timing)
    book = RowBook(prompts, params)
    sampling = BatchSampling(params, shared_params, state.device)
    logits = state.prefill(prompts)  # [B, 1, V]
    row_steps = 0
    while True:
        probs = sampling.probs(logits)[:, 0]  # [B, V]
        tokens = sample(probs, sampling.streams.uniform(book.active, 1)[:, 0])  # [B]
        logprobs = token_logprobs(probs, tokens)  # [B]
        done = book.emit([[t] for t in tokens.tolist()], [[x] for x in logprobs.tolist()])
        keep = book.drop(done, state.device)
        if not book.active:
            break
        if keep is not None:
            state.retain(keep)
            sampling.select(keep)
            tokens = tokens[keep]
        row_steps += len(book.active)
        logits = state.extend(tokens.unsqueeze(1))  # [B, 1, V]
    stats = GenerationStats(rows=len(prompts), new_tokens=sum(map(len, book.generated)),
                            target_calls=state.calls, row_steps=row_steps, step_tokens=row_steps,
                            target_seconds=state.seconds, seconds=time.perf_counter() - start)
    return book.completions(), stats
