"""Sampling parameters: one frozen dataclass, validated once, shared by Python callers and CLI flags.

A ``SamplingParams`` covers one request. ``Engine.generate`` takes either one of them for the whole
batch or a list with one per row (the gateway batches unrelated requests that way); see
:mod:`trajkit.engine.rng` for how the seed and the row index make each row's random stream.

Worked example::

    >>> SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=32, stop_token_ids=[257], seed=1)
    SamplingParams(temperature=0.7, top_k=0, top_p=0.9, max_new_tokens=32, stop_token_ids=(257,), seed=1, top_logprobs=0, stop_strings=())
    >>> SamplingParams(top_p=0)
    Traceback (most recent call last):
    ...
    trajkit.errors.ConfigError: top_p must be in (0, 1], got 0 (set top_p=1.0 to turn nucleus sampling off)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from trajkit.errors import ConfigError


MIN_TEMPERATURE = 1e-5
"""Temperatures in ``(0, MIN_TEMPERATURE)`` are greedy decoding (stored as 0): dividing float32 logits by
them overflows or underflows (below ~1e-38 the temperature itself rounds to 0), and above it sampling is
already indistinguishable from greedy for any logit gap a model produces."""


MAX_TOP_LOGPROBS = 20


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion; ``temperature=0`` (or below :data:`MIN_TEMPERATURE`) is greedy."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    max_new_tokens: int = 64
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None
    top_logprobs: int = 0
    stop_strings: tuple[str, ...] = ()

    __field_docs__ = {
        "temperature": f"softmax temperature; 0 (or below {MIN_TEMPERATURE:g}) = greedy",
        "top_k": "keep the k most likely tokens; 0 = off",
        "top_p": "keep the smallest set of tokens with mass >= top_p; 1 = off",
        "max_new_tokens": "most tokens generated per row",
        "seed": "base seed; row i uses a stream derived from (seed, i); unset = fresh entropy",
        "top_logprobs": f"also record the {MAX_TOP_LOGPROBS} or fewer most likely tokens of each sampled position "
                        "(Completion.top_logprobs); 0 = off",
        "stop_strings": "texts that end a row at the token completing one of them (kept, as a stop id is); "
                        "the engine needs its tokenizer's decode for them (trajkit.engine.stoptext)",
    }

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop_token_ids", _token_tuple(self.stop_token_ids))
        object.__setattr__(self, "stop_strings", _string_tuple(self.stop_strings))
        _check_number("temperature", self.temperature, low=0.0, hint="use 0 for greedy decoding")
        if self.temperature < MIN_TEMPERATURE:
            object.__setattr__(self, "temperature", 0.0)
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise ConfigError(f"top_k must be an integer >= 0, got {self.top_k!r} (0 turns top-k off)")
        _check_number("top_p", self.top_p, low=0.0, hint="set top_p=1.0 to turn nucleus sampling off")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p!r} "
                              "(set top_p=1.0 to turn nucleus sampling off)")
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) \
                or self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be an integer >= 1, got {self.max_new_tokens!r}")
        if isinstance(self.top_logprobs, bool) or not isinstance(self.top_logprobs, int) \
                or not 0 <= self.top_logprobs <= MAX_TOP_LOGPROBS:
            raise ConfigError(f"top_logprobs must be an integer in [0, {MAX_TOP_LOGPROBS}], got {self.top_logprobs!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                                      or self.seed < 0):
            raise ConfigError(f"seed must be an integer >= 0 or None, got {self.seed!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def _check_number(name: str, value, *, low: float, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < low:
        raise ConfigError(f"{name} must be a finite number >= {low:g}, got {value!r} ({hint})")


def _token_tuple(ids) -> tuple[int, ...]:
    if isinstance(ids, int):
        ids = (ids,)
    out = tuple(ids)
    for t in out:
        if isinstance(t, bool) or not isinstance(t, int) or t < 0:
            raise ConfigError(f"stop_token_ids must be non-negative integers, got {t!r}")
    return out


def _string_tuple(strings) -> tuple[str, ...]:
    out = (strings,) if isinstance(strings, str) else tuple(strings)
    if any(not isinstance(s, str) or not s for s in out):
        raise ConfigError(f"stop_strings must be non-empty strings, got {strings!r}")
    return out


def per_row(params: SamplingParams | Sequence[SamplingParams], rows: int) -> list[SamplingParams]:
    """One ``SamplingParams`` per row: a single object is shared, a list must have one per row."""
    if isinstance(params, SamplingParams):
        return [params] * rows
    params = list(params)
    if len(params) != rows or not all(isinstance(p, SamplingParams) for p in params):
        raise ConfigError(f"params must be one SamplingParams or a list of {rows} (one per prompt), "
                          f"got {len(params)} item(s)")
    return params


def check_vocab(params: list[SamplingParams], vocab_size: int) -> None:
    """Stop tokens must exist in the model's vocabulary."""
    for p in params:
        bad = [t for t in p.stop_token_ids if t >= vocab_size]
        if bad:
            raise ConfigError(f"stop_token_ids {bad} are outside the model vocabulary (size {vocab_size})")
