"""Sampling and prompt scoring for the Tinker server: trajkit's engine over a copy of the base model, a
saved adapter merged in.

A sampling session names saved sampler weights (or the base model); before a request the engine's copy
gets that adapter merged (:meth:`trajkit.engine.Engine.update_adapter`; the same merge as the RL
trainer's adapter-only sync), kept until another session's adapter is needed. Tinker's
``SamplingParams`` map onto trajkit's: ``max_tokens`` -> ``max_new_tokens``, ``top_k`` -1 -> 0 (off),
``seed`` as is (row ``i`` of a request samples from the stream of ``(seed, i)``, so ``num_samples`` rows
differ and a seeded request repeats exactly). Log-probs are the engine's, under the distribution each
token was drawn from; ``topk_sample_logprobs`` the engine's ``top_logprobs`` of that distribution.

``stop`` as the SDK's docstring defines it: ``None`` the tokenizer's end-of-sequence token, ``[]`` nothing
(run to ``max_tokens``), token ids those ids, strings that text (any number of tokens) -- EOS stays a stop
whenever ``stop`` is not ``[]`` ("None keeps implicit EOS stopping; [] disables all stop tokens, including
EOS"). A row ends at the first token whose decoded prefix of the sample contains a stop string, and that
token is the row's last: the stop text is in the returned tokens, as tinker-cookbook's ``role_colon``
renderer expects (its ``parse_response`` splits the decoded sample on ``"\n\nUser:"`` and calls a
sample without it malformed), and as a stop id is. The engine stops there as it samples
(``SamplingParams.stop_strings``, :mod:`trajkit.engine.stoptext`): no token is sampled past the stop.

Prompt log-probs (``compute_logprobs``, ``prompt_logprobs``, ``topk_prompt_logprobs``): one forward of
the prompt (:meth:`trajkit.tinker.training.TrainingClients.adapter_logprobs`: the training side's float32
model with the session's adapter added unmerged, so the values are ``forward``'s, not the merged copy's,
which differ by float rounding), raw ``log_softmax`` (temperature 1, as ``forward`` computes them): entry
``t`` is ``log p(prompt[t] | prompt[:t])``, NaN at ``t = 0`` (no context; the SDK reads NaN as ``None``)
and before the last ``prompt_logprobs_last_n`` positions when that is set (:func:`prompt_scores`); the
top-k rows come from the same log-softmax (unscored rows hold the SDK's empty sentinel).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from trajkit.engine import Engine, SamplingParams
from trajkit.engine.adapters import LoraAdapter
from trajkit.engine.params import MAX_TOP_LOGPROBS
from trajkit.errors import InputError

BASE = LoraAdapter({}, scale=1.0)  # no adapter: the base model


@dataclass
class Sequence:
    tokens: list[int]
    logprobs: list[float]
    stop_reason: str  # "stop" | "length"
    topk: list[list[tuple[int, float]]] | None = None  # topk_sample_logprobs: per token, (id, log p)


@dataclass
class PromptScores:
    """``logprobs [N]`` of the prompt's tokens (NaN where unscored); ``topk_ids``/``topk_logprobs [N, k]``
    (k = 0 when not asked; unscored rows hold id 0, log p -99999, the SDK's empty sentinel)."""

    logprobs: list[float]
    topk_ids: list[list[int]]
    topk_logprobs: list[list[float]]


@dataclass(frozen=True)
class Stops:
    ids: tuple[int, ...]
    strings: tuple[str, ...] = ()


def stops(stop, tokenizer) -> Stops:
    """Tinker's ``stop`` as stop ids (EOS included unless ``stop == []``) and stop strings."""
    eos = (tokenizer.eos_token_id,) if tokenizer.eos_token_id is not None else ()
    if stop is None:
        return Stops(eos)
    items = [stop] if isinstance(stop, str) else list(stop)
    if not items:
        return Stops(())
    ids = [int(x) for x in items if isinstance(x, int) and not isinstance(x, bool)]
    strings = [x for x in items if isinstance(x, str)]
    if len(ids) + len(strings) != len(items) or any(not s for s in strings):
        raise InputError(f"stop must be a string, a list of non-empty strings or a list of token ids, got {stop!r}",
                         field="sampling_params.stop")
    return Stops(tuple(dict.fromkeys([*ids, *eos])), tuple(strings))


def engine_params(params: dict, tokenizer, max_tokens_default: int = 64, top_logprobs: int = 0) -> SamplingParams:
    """Tinker's ``SamplingParams`` (a dict as the SDK sends it) -> trajkit's (``stop``: :func:`stops`)."""
    top_k = int(params.get("top_k", -1))
    stop = stops(params.get("stop"), tokenizer)
    try:
        return SamplingParams(temperature=float(params.get("temperature", 1.0)), top_k=max(top_k, 0),
                              top_p=float(params.get("top_p", 1.0)),
                              max_new_tokens=int(params.get("max_tokens") or max_tokens_default),
                              stop_token_ids=stop.ids, stop_strings=stop.strings, seed=params.get("seed"),
                              top_logprobs=top_logprobs)
    except ValueError as exc:
        raise InputError(str(exc), field="sampling_params") from None


def check_topk(k: int, field: str, most: int = MAX_TOP_LOGPROBS) -> int:
    if not 0 <= k <= most:
        raise InputError(f"{field} must be between 0 and {most}, got {k}", field=field)
    return k


EMPTY_LOGPROB = -99999.0  # tinker.types.topk_logprobs.MASK_LOGPROB: an empty top-k cell


class Sampler:
    """Trajkit's engine over ``model`` (a plain HF copy of the base), one adapter merged at a time."""

    def __init__(self, model, tokenizer):
        self.engine = Engine(model.eval(), decode=tokenizer.decode)
        self.tokenizer = tokenizer
        self.current: str | None = None  # the key of the merged adapter

    def _use(self, key: str, adapter: LoraAdapter) -> None:
        if key != self.current:
            self.engine.update_adapter(adapter)
            self.current = key

    def sample(self, key: str, adapter: LoraAdapter, prompt: list[int], n: int, params: dict,
               topk: int = 0) -> list[Sequence]:
        """``n`` samples of ``prompt`` with adapter ``adapter`` (cached under ``key``) merged; ``topk``: the
        most likely tokens of each sampled position too."""
        if n < 1:
            raise InputError(f"num_samples must be >= 1, got {n}", field="num_samples")
        sp = engine_params(params, self.tokenizer, top_logprobs=check_topk(topk, "topk_sample_logprobs"))
        self.engine.check_request([prompt], sp)
        self._use(key, adapter)
        return [Sequence(c.token_ids, c.logprobs, "stop" if c.finish_reason == "stop" else "length",
                         c.top_logprobs if topk else None)
                for c in self.engine.generate([list(prompt)] * n, sp)]


def prompt_scores(logp: torch.Tensor, prompt: list[int], topk: int = 0, last_n: int | None = None) -> PromptScores:
    """``logp: [N-1, V]`` (row ``t`` predicts ``prompt[t + 1]``) -> the prompt's :class:`PromptScores`: entry 0
    and the entries before the last ``last_n`` unscored (module docstring); top-k from the same rows."""
    n = len(prompt)
    assert logp.shape[0] == n - 1, (logp.shape, n)
    check_topk(topk, "topk_prompt_logprobs", logp.shape[-1])
    if last_n is not None and not 1 <= last_n <= n - 1:
        raise InputError(f"prompt_logprobs_last_n must be between 1 and len(prompt) - 1 = {n - 1}, got {last_n}",
                         field="prompt_logprobs_last_n")
    first = n - (last_n or n - 1)  # the first scored position (>= 1)
    picked = logp.gather(-1, torch.tensor(prompt[1:], device=logp.device)[:, None]).squeeze(-1).tolist()
    logprobs = [math.nan] * first + picked[first - 1:]
    if not topk:
        return PromptScores(logprobs, [], [])
    ids = [[0] * topk for _ in range(first)]
    lps = [[EMPTY_LOGPROB] * topk for _ in range(first)]
    values, idx = logp[first - 1:].topk(topk, dim=-1)  # [N-first, k]
    return PromptScores(logprobs, ids + idx.tolist(), lps + values.tolist())
