"""``Engine``: the one entry point trajkit's trainer, gateway and benchmarks generate with::

    engine = Engine(target, drafter=DraftModel(small), num_draft_tokens=3)
    out = engine.generate([[1, 2, 3]], SamplingParams(temperature=1.0, max_new_tokens=32, seed=0))
    out[0].token_ids, out[0].logprobs, out[0].finish_reason, out.stats.acceptance_rate

Without a drafter it samples plainly (one target forward per token). With one it runs lossless
speculative sampling: the completions are distributed exactly as plain sampling's. ``num_draft_tokens``
is a fixed ``k >= 1`` or ``"auto"``: measure ``c`` and ``v(k)`` for the batch size, take ``alpha`` from
the previous calls (a short probe on the first), and pick the ``k`` that maximises the predicted speedup
(:mod:`trajkit.engine.choose_k`), falling back to plain decoding when no ``k`` pays. That controller is
``engine.auto_k`` (:class:`trajkit.engine.auto_k.AutoK`; its ``last_choice`` holds the last decision).

The engine owns an inference copy of the policy: ``update_weights(state_dict)`` loads new weights pushed
by a trainer (the drafter keeps its own weights).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import torch

from trajkit.engine.auto_k import AutoK
from trajkit.engine.drafters import Drafter, check_vocab
from trajkit.engine.drafters.base import can_admit
from trajkit.engine.params import SamplingParams, check_vocab as check_stop_vocab, per_row
from trajkit.engine.plain import generate_plain
from trajkit.engine.prefix import PrefixCache, Reuse
from trajkit.engine.score import token_logprobs
from trajkit.engine.session import DecodeSession, SpeculativeSession
from trajkit.engine.speculative import generate_speculative
from trajkit.engine.types import Completions
from trajkit.errors import ConfigError, InputError


@dataclass
class EngineConfig:
    """How the engine speculates. ``num_draft_tokens``: k >= 1 or "auto" (used only with a drafter)."""

    num_draft_tokens: int | str = 3
    max_draft_tokens: int = 4  # largest k "auto" considers
    probe_tokens: int = 32  # max_new_tokens of the probe run that first measures alpha in "auto" mode
    alpha_smoothing: float = 0.5  # weight of the newest call in the running alpha estimate
    # wait for the device after each target forward so that GenerationStats.target_seconds is device time
    # (one extra host synchronisation per forward); off: host time, i.e. launch time on a GPU
    sync_timing: bool = False
    # exact prefix cache (trajkit.engine.prefix): most tokens whose KV states it keeps across calls (0 = off),
    # in blocks of prefix_block_tokens; share_prompts: identical prompts of one call are prefilled once
    prefix_cache_tokens: int = 0
    prefix_block_tokens: int = 16
    share_prompts: bool = True

    def __post_init__(self) -> None:
        k = self.num_draft_tokens
        if k != "auto" and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ConfigError(f"num_draft_tokens must be an integer >= 1 or 'auto', got {k!r} "
                              "(for plain decoding pass no drafter)")
        if isinstance(self.max_draft_tokens, bool) or not isinstance(self.max_draft_tokens, int) \
                or self.max_draft_tokens < 1:
            raise ConfigError(f"max_draft_tokens must be an integer >= 1, got {self.max_draft_tokens!r}")
        if not isinstance(self.probe_tokens, int) or self.probe_tokens < 1:
            raise ConfigError(f"probe_tokens must be an integer >= 1, got {self.probe_tokens!r}")
        if not 0.0 < self.alpha_smoothing <= 1.0:
            raise ConfigError(f"alpha_smoothing must be in (0, 1], got {self.alpha_smoothing!r}")
        if not isinstance(self.sync_timing, bool):
            raise ConfigError(f"sync_timing must be True or False, got {self.sync_timing!r}")
        for name in ("prefix_cache_tokens", "prefix_block_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "prefix_cache_tokens" else 1):
                raise ConfigError(f"{name} must be an integer >= {0 if name == 'prefix_cache_tokens' else 1}, "
                                  f"got {value!r}")
        if not isinstance(self.share_prompts, bool):
            raise ConfigError(f"share_prompts must be True or False, got {self.share_prompts!r}")


class Engine:
    """Batched generation from a Hugging Face causal LM, optionally with a drafter."""

    def __init__(self, model, drafter: Drafter | None = None, num_draft_tokens: int | str | None = None,
                 config: EngineConfig | None = None, decode=None):
        config = config or EngineConfig()
        self.decode = decode  # the tokenizer's decode: rows with SamplingParams.stop_strings need it
        if num_draft_tokens is not None:
            config = replace(config, num_draft_tokens=num_draft_tokens)
        self.config = config
        if not hasattr(model, "config") or not callable(getattr(model, "get_output_embeddings", None)):
            raise ConfigError("model must be a Hugging Face causal LM (e.g. AutoModelForCausalLM)")
        self.model = model.eval()
        self._merger = None  # the LoRA merge of update_adapter, made on the first adapter
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        if drafter is not None:
            if not isinstance(drafter, Drafter):
                raise ConfigError(f"drafter must implement trajkit.engine.Drafter, got {type(drafter).__name__}")
            check_vocab(drafter, self.vocab_size)
        self.drafter = drafter
        self.policy_version = 0
        self.auto_k = AutoK(self.model, drafter, config.max_draft_tokens, config.probe_tokens,
                            config.alpha_smoothing, config.sync_timing)
        self.num_params = sum(p.numel() for p in self.model.parameters())
        self.prefix_cache: PrefixCache | None = None
        self.set_prefix_cache(config.prefix_cache_tokens)

    def generate(self, prompt_ids: list[list[int]],
                 params: SamplingParams | Sequence[SamplingParams] | None = None) -> Completions:
        """Complete every prompt; returns ``Completions`` (a list of ``Completion`` with ``.stats``).

        ``prompt_ids``: a list of prompts, each a list of token ids (lists, tuples, torch tensors or numpy
        arrays of integers); ``params``: one ``SamplingParams``, one per prompt, or None for the defaults."""
        params = SamplingParams() if params is None else params
        prompts, rows = self.check_request(prompt_ids, params)
        shared = isinstance(params, SamplingParams)
        k = self._num_draft_tokens(prompts, rows, shared)
        if k == 0:
            completions, stats = generate_plain(self.model, prompts, rows, shared, self.config.sync_timing,
                                                self.reuse, self.decode)
        else:
            completions, stats = generate_speculative(self.model, self.drafter, k, prompts, rows, shared,
                                                      self.config.sync_timing, self.reuse, self.decode)
            self.auto_k.observe(stats, len(prompts))
        return Completions(completions, stats, self.policy_version)

    def session(self) -> DecodeSession | SpeculativeSession:
        """A step-wise session for continuous batching: ``admit(prompts, params)`` between steps, ``step()``
        for the next tokens of every active row (:mod:`trajkit.engine.session`): plain decoding, or
        speculative rounds when the engine has a drafter that can admit rows (``Drafter.admit``; every
        built-in drafter can). With ``num_draft_tokens="auto"`` k is chosen for each busy period's first
        batch (``auto_k``), and each period's acceptance updates the running alpha."""
        sync = self.config.sync_timing
        if self.drafter is None or not can_admit(self.drafter):
            return DecodeSession(self.model, sync, check=self.check_request, reuse=self.reuse, decode=self.decode)
        k = self.config.num_draft_tokens
        if k != "auto":
            return SpeculativeSession(self.model, self.drafter, k, sync, check=self.check_request, reuse=self.reuse,
                                      decode=self.decode)
        # on_idle gets each busy period's stats and the batch size its k was chosen for: auto k folds in
        # the period's alpha and checks its speed against plain decoding at that batch size
        return SpeculativeSession(self.model, self.drafter, lambda prompts, rows: self.auto_k.pick(prompts, rows, False),
                                  sync, check=self.check_request, on_idle=self.auto_k.observe, reuse=self.reuse,
                                  decode=self.decode)

    def set_prefix_cache(self, budget_tokens: int) -> PrefixCache | None:
        """Keep the KV states of up to ``budget_tokens`` computed tokens across calls (0 = off): an exact
        prefix cache (:mod:`trajkit.engine.prefix`), emptied by every ``update_weights``. An existing cache
        keeps its contents when only its budget changes (then trimmed to it)."""
        cfg = self.config
        if not budget_tokens:
            self.prefix_cache = None
        elif self.prefix_cache is None:
            self.prefix_cache = PrefixCache(self.model, budget_tokens, cfg.prefix_block_tokens)
            self.prefix_cache.bind(weights_version=self.policy_version)
        else:
            self.prefix_cache.budget_tokens = budget_tokens
            self.prefix_cache.resize()
        self.config = replace(cfg, prefix_cache_tokens=budget_tokens)
        self.reuse = Reuse(self.prefix_cache, cfg.share_prompts)
        return self.prefix_cache

    def check_request(self, prompt_ids, params) -> tuple[list[list[int]], list[SamplingParams]]:
        """Validated prompts and one ``SamplingParams`` per prompt (stop tokens in the vocabulary, rows
        within the model's positions)."""
        prompts = self._check_prompts(prompt_ids)
        rows = per_row(params, len(prompts))
        check_stop_vocab(rows, self.vocab_size)
        if self.decode is None and any(r.stop_strings for r in rows):
            raise ConfigError("stop_strings need the tokenizer's decode: build the Engine with "
                              "decode=tokenizer.decode")
        self._check_positions([len(p) + r.max_new_tokens for p, r in zip(prompts, rows)], "prompt + max_new_tokens")
        return prompts, rows

    def token_logprobs(self, prompt_ids: list[list[int]], completion_ids: list[list[int]],
                       params: SamplingParams | None = None) -> list[list[float]]:
        """Log-probs of ``completion_ids`` after ``prompt_ids`` under the model (raw log-softmax, or
        warped by ``params``' temperature / top-k / top-p: then they match ``Completion.logprobs``)."""
        prompts = self._check_prompts(prompt_ids)
        completions = check_ids(completion_ids, self.vocab_size, "completion_ids", allow_empty=True)
        if len(completions) != len(prompts):
            raise InputError(f"{len(completions)} completions for {len(prompts)} prompts",
                             field="completion_ids")
        self._check_positions([len(p) + len(c) for p, c in zip(prompts, completions)], "prompt + completion")
        return token_logprobs(self.model, prompts, completions, params)

    def update_weights(self, state_dict: dict[str, torch.Tensor], strict: bool = True) -> int:
        """Load a trainer's weights into the engine's model; returns the new ``policy_version``."""
        own = self.model.state_dict()
        if not set(state_dict) & set(own):
            raise ConfigError(f"state_dict: none of its keys match the engine's model "
                              f"(expected keys like {next(iter(own))!r})")
        try:
            with torch.no_grad():
                self.model.load_state_dict(state_dict, strict=strict)
        except RuntimeError as exc:
            raise ConfigError(f"state_dict does not fit the engine's model: {exc}") from exc
        return self._bump_version()

    def update_adapter(self, adapter) -> int:
        """Merge a LoRA adapter (:class:`trajkit.engine.adapters.LoraAdapter`) into the engine's model in
        place of the one before (an adapter-only weight sync); returns the new ``policy_version``."""
        from trajkit.engine.adapters import AdapterMerger

        if self._merger is None:
            self._merger = AdapterMerger(self.model)
        self._merger.apply(adapter)
        return self._bump_version()

    def _bump_version(self) -> int:
        self.policy_version += 1
        if self.prefix_cache is not None:  # states computed by the old weights are stale: flush
            self.prefix_cache.bind(weights_version=self.policy_version)
        return self.policy_version

    def calibrate(self, prompt_ids: list[list[int]], params: SamplingParams = SamplingParams()) -> dict:
        """Measure ``c``, ``v(k)`` at this batch size and ``alpha`` by a short probe; choose ``k``
        (the choice, also in ``engine.auto_k.last_choice``)."""
        return self.auto_k.calibrate(self._check_prompts(prompt_ids), params)

    def _num_draft_tokens(self, prompts, rows, shared) -> int:
        """``k`` for this call: 0 without a drafter, the configured ``k``, or ``auto_k``'s choice."""
        if self.drafter is None:
            return 0
        if self.config.num_draft_tokens == "auto":
            return self.auto_k.pick(prompts, rows, shared)
        return self.config.num_draft_tokens

    def _check_prompts(self, prompt_ids) -> list[list[int]]:
        return check_ids(prompt_ids, self.vocab_size, "prompt_ids", allow_empty=False)

    def _check_positions(self, lengths: list[int], what: str) -> None:
        """Rows may not run past the model's position embeddings (``config.max_position_embeddings``)."""
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if not isinstance(limit, int):
            return
        for i, n in enumerate(lengths):
            if n > limit:
                raise ConfigError(f"row {i}: {what} is {n} tokens, past the model's {limit} positions "
                                  "(max_position_embeddings); shorten the prompt or lower max_new_tokens")


def check_ids(rows, vocab_size: int, field: str, *, allow_empty: bool) -> list[list[int]]:
    """``rows`` as a list of lists of ``int`` in ``[0, vocab_size)``: each row a list, tuple, torch tensor or
    numpy array of integers (numpy integer scalars included); otherwise :class:`InputError` naming the row."""
    if hasattr(rows, "tolist"):
        rows = rows.tolist()
    if not isinstance(rows, (list, tuple)) or not rows:
        raise InputError(f"{field} must be a non-empty list of prompts, each a list of token ids", field=field)
    if all(_is_int(t) for t in rows):
        raise InputError(f"{field} is a flat list of ids; it must be a list of prompts, each a list of ids "
                         f"(e.g. [[1, 2, 3]] for one prompt)", field=field)
    out = []
    for i, row in enumerate(rows):
        row = row.tolist() if hasattr(row, "tolist") else row
        if not isinstance(row, (list, tuple)):
            raise InputError(f"row is a {type(row).__name__}; {field} must be a list of prompts, each a list "
                             "of ids", row=i, field=field)
        if not row and not allow_empty:
            raise InputError("each prompt needs at least one token id (e.g. BOS)", row=i, field=field)
        bad = next((t for t in row if not _is_int(t) or not 0 <= t < vocab_size), None)
        if bad is not None:
            raise InputError(f"token ids must be integers in [0, {vocab_size}), got {bad!r}", row=i, field=field)
        out.append([int(t) for t in row])
    return out


def _is_int(value) -> bool:
    """An integer token id: ``int`` or a numpy integer, never a bool (nor a float that looks whole)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
