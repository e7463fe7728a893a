"""Warm starts for RL: a policy briefly fine-tuned on demonstrations and a draft distilled from it,
built once and cached.

RL from a random model gets no reward signal, and the tests and demo cannot download weights, so the RL
trainer's ``task_warmstart`` model source builds its own starting point on the CPU:

1. the policy is fine-tuned on ``policy_steps`` batches of correct demonstrations (cross-entropy on the
   completion tokens only). The default is deliberately short: the policy learns the format and is right
   only part of the time at temperature 1, which is the room RL has to improve;
2. a draft with weights (``model`` or ``window`` kind) is distilled from that policy on the same kind of
   data: soft cross-entropy to the policy's distribution for ``draft_steps`` batches. Drafters without
   weights (``ngram``) and runs without a drafter train nothing here.

Both are saved under ``cache_dir()/rl-warmstart/<hash of the key>/`` (the policy with ``save_pretrained``,
the draft by its kind) and loaded from there next time. This recipe knows nothing of RL tasks: the caller
hands it the demonstrations as collated batches (``input_ids, attention: [B, L]``, ``mask: [B, L-1]``).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from trajkit.models.fit import Schedule, fit, next_token_loss, soft_cross_entropy
from trajkit.models.load import load_model
from trajkit.recipes.cache import building, cache_dir

VERSION = 3  # bump when this recipe changes what a key builds (3: the one Hermes layout, traces/hermes_text)

Batches = Callable[[int], Iterator[Any]]  # offset -> endless batches with input_ids, attention, mask


@dataclass
class WarmStart:
    """What to build: ``key`` (JSON-able, hashed into the cache path) fully determines the result."""

    key: dict
    policy: torch.nn.Module  # freshly initialised
    policy_schedule: Schedule
    draft: torch.nn.Module | None = None  # freshly initialised, or None (nothing to distil)
    draft_kind: Any = None  # trajkit.engine.drafters.registry.DraftKind of ``draft``
    draft_schedule: Schedule | None = None

    def path(self) -> Path:
        blob = json.dumps({"v": VERSION, **self.key}, sort_keys=True)
        return cache_dir() / "rl-warmstart" / hashlib.sha256(blob.encode()).hexdigest()[:16]


def _logits(model, batch) -> torch.Tensor:
    return model(input_ids=batch.input_ids, attention_mask=batch.attention).logits


def train_warm_start(spec: WarmStart, batches: Batches) -> None:
    """Fine-tune ``spec.policy`` on ``batches(0)``; distil ``spec.draft`` from it on ``batches(10**7)``."""
    policy = spec.policy
    fit(policy, batches(0), lambda b: next_token_loss(_logits(policy, b), b.input_ids, b.mask),
        spec.policy_schedule, name="warmstart")
    if spec.draft is None:
        return
    policy.eval()

    def distill(b) -> torch.Tensor:
        with torch.no_grad():
            teacher = torch.log_softmax(_logits(policy, b)[:, :-1].float(), dim=-1)
        return soft_cross_entropy(_logits(spec.draft, b)[:, :-1], teacher, b.mask)
    fit(spec.draft, batches(10_000_000), distill, spec.draft_schedule, name="warmdraft")


def warm_start(spec: WarmStart, batches: Batches) -> tuple[torch.nn.Module, torch.nn.Module | None]:
    """(policy, draft) for ``spec``: from the cache, or trained now and published there."""
    path = spec.path()
    if not (path / "done").exists():
        with torch.random.fork_rng(devices=[]):
            train_warm_start(spec, batches)
        with building(path) as tmp:
            spec.policy.save_pretrained(tmp / "policy")
            if spec.draft is not None:
                spec.draft_kind.save(spec.draft, tmp / "draft")
            (tmp / "done").touch()
    policy = load_model(path / "policy", what="warm-started policy")
    draft = spec.draft_kind.load(path / "draft") if spec.draft is not None else None
    return policy, draft
