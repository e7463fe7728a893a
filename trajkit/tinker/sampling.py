"""Sampling for the Tinker server: trajkit's engine over a copy of the base model, a saved adapter merged in.

A sampling session names saved sampler weights (or the base model); before a request the engine's copy
gets that adapter merged (:meth:`trajkit.engine.Engine.update_adapter`; the same merge as the RL
trainer's adapter-only sync), kept until another session's adapter is needed. Tinker's
``SamplingParams`` map onto trajkit's: ``max_tokens`` -> ``max_new_tokens``, ``top_k`` -1 -> 0 (off),
``seed`` as is (row ``i`` of a request samples from the stream of ``(seed, i)``, so ``num_samples`` rows
differ and a seeded request repeats exactly), ``stop``: token ids as stop ids, strings only when each is
one token of the tokenizer (else a user error), ``None`` the tokenizer's end-of-sequence token, ``[]``
none. Log-probs are the engine's, under the distribution each token was drawn from.
"""
from __future__ import annotations

from dataclasses import dataclass

from trajkit.engine import Engine, SamplingParams
from trajkit.engine.adapters import LoraAdapter
from trajkit.errors import InputError

BASE = LoraAdapter({}, scale=1.0)  # no adapter: the base model


@dataclass
class Sequence:
    tokens: list[int]
    logprobs: list[float]
    stop_reason: str  # "stop" | "length"


def stop_ids(stop, tokenizer) -> tuple[int, ...]:
    """Tinker's ``stop`` as the engine's stop token ids (see the module docstring)."""
    if stop is None:
        return (tokenizer.eos_token_id,) if tokenizer.eos_token_id is not None else ()
    items = [stop] if isinstance(stop, str) else list(stop)
    out = []
    for item in items:
        if isinstance(item, int):
            out.append(item)
            continue
        ids = tokenizer.encode(item, add_special_tokens=False)
        if len(ids) != 1:
            raise InputError(f"stop string {item!r} is {len(ids)} tokens; this server stops on single tokens "
                             "(give token ids, or strings that are one token)", field="sampling_params.stop")
        out.append(ids[0])
    return tuple(out)


def engine_params(params: dict, tokenizer, max_tokens_default: int = 64) -> SamplingParams:
    """Tinker's ``SamplingParams`` (a dict as the SDK sends it) -> trajkit's."""
    top_k = int(params.get("top_k", -1))
    try:
        return SamplingParams(temperature=float(params.get("temperature", 1.0)), top_k=max(top_k, 0),
                              top_p=float(params.get("top_p", 1.0)),
                              max_new_tokens=int(params.get("max_tokens") or max_tokens_default),
                              stop_token_ids=stop_ids(params.get("stop"), tokenizer), seed=params.get("seed"))
    except ValueError as exc:
        raise InputError(str(exc), field="sampling_params") from None


class Sampler:
    """Trajkit's engine over ``model`` (a plain HF copy of the base), one adapter merged at a time."""

    def __init__(self, model, tokenizer):
        self.engine = Engine(model.eval())
        self.tokenizer = tokenizer
        self.current: str | None = None  # the key of the merged adapter

    def sample(self, key: str, adapter: LoraAdapter, prompt: list[int], n: int, params: dict) -> list[Sequence]:
        """``n`` samples of ``prompt`` with adapter ``adapter`` (cached under ``key``) merged."""
        if n < 1:
            raise InputError(f"num_samples must be >= 1, got {n}", field="num_samples")
        sp = engine_params(params, self.tokenizer)
        self.engine.check_request([prompt], sp)
        if key != self.current:
            self.engine.update_adapter(adapter)
            self.current = key
        out = self.engine.generate([list(prompt)] * n, sp)
        return [Sequence(c.token_ids, c.logprobs, "stop" if c.finish_reason == "stop" else "length") for c in out]
