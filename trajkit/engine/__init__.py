"""trajkit.engine: batched generation with lossless speculative decoding for Hugging Face causal LMs.

    from trajkit.engine import Engine, SamplingParams, DraftModel, NgramDrafter

    engine = Engine(target, drafter=DraftModel(draft), num_draft_tokens=3)
    out = engine.generate(prompt_ids, SamplingParams(temperature=1.0, max_new_tokens=64, seed=0))
    out[0].token_ids, out[0].logprobs, out[0].finish_reason, out.stats.acceptance_rate

See docs/engine.md.
"""

from trajkit._lazy import lazy_getattr

# Lazy exports (PEP 562): importing the package does not import torch; the first use does.
_EXPORTS = {
    "Drafter": "trajkit.engine.drafters",
    "DraftModel": "trajkit.engine.drafters",
    "NgramDrafter": "trajkit.engine.drafters",
    "WindowDrafter": "trajkit.engine.drafters",
    "Proposal": "trajkit.engine.drafters",
    "draft_kind": "trajkit.engine.drafters",
    "Engine": "trajkit.engine.engine",
    "EngineConfig": "trajkit.engine.engine",
    "DecodeSession": "trajkit.engine.session",
    "SpeculativeSession": "trajkit.engine.session",
    "SamplingParams": "trajkit.engine.params",
    "Completion": "trajkit.engine.types",
    "Completions": "trajkit.engine.types",
    "GenerationStats": "trajkit.engine.types",
}

__all__ = list(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
