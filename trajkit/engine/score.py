"""Log-probabilities of given completions under a model: one batched forward, no cache.

The trainer recomputes logprobs with its own (differentiable) code; this helper is for checks and for
the gateway: with the same ``SamplingParams`` its values equal ``Completion.logprobs`` up to float noise
(the sampler scores tokens incrementally with a KV cache, this scores them all at once).
"""
from __future__ import annotations

import torch

from trajkit.engine.kvstate import forward_keywords, left_pad
from trajkit.engine.params import SamplingParams
from trajkit.engine.warp import row_params, token_logprobs as gather_logprobs, warp_probs


@torch.inference_mode()
def token_logprobs(model, prompts: list[list[int]], completions: list[list[int]],
                   params: SamplingParams | None = None) -> list[list[float]]:
    """``log p(completion[b][i] | prompt[b] + completion[b][:i])`` per row; raw log-softmax when
    ``params`` is None, else the post-warping distribution of ``params``."""
    device = next(model.parameters()).device
    full = [p + c for p, c in zip(prompts, completions)]
    tokens, valid = left_pad(full, 0, device)  # [B, T]
    positions = (valid.long().cumsum(1) - 1).clamp(min=0)
    cache_kw, _ = forward_keywords(model)
    logits = model(input_ids=tokens, attention_mask=valid, position_ids=positions,
                   **{cache_kw: None, "use_cache": False}).logits  # [B, T, V]
    width = tokens.shape[1]
    out = []
    for b, (p, c) in enumerate(zip(prompts, completions)):
        if not c:
            out.append([])
            continue
        start = width - len(c) - 1  # logits at position t predict token t + 1
        row_logits = logits[b, start:width - 1]  # [len(c), V]
        target = tokens[b, start + 1:]  # [len(c)]
        if params is None:
            lp = torch.log_softmax(row_logits.to(torch.promote_types(row_logits.dtype, torch.float32)), dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
        else:
            n = len(c)
            warp = row_params([params.temperature] * n, [params.top_k] * n, [params.top_p] * n, device)
            lp = gather_logprobs(warp_probs(row_logits, *warp), target)
        out.append(lp.tolist())
    return out
