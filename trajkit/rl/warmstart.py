"""Warm-started policy and draft for a task: brief supervised fine-tuning, built once and cached.

RL from a random model gets no reward signal, and the tests and demo cannot download weights, so the
``task_warmstart`` model source builds its own starting point on the CPU:

1. the policy (a tiny Llama of ``policy``'s shape) is fine-tuned on ``policy.warmstart_steps`` batches of
   the task's correct demonstrations (``task.demonstration``; cross-entropy on model tokens only). The
   default is deliberately short: the policy learns the format and is right only part of the time at
   temperature 1, which is the room RL has to improve;
2. the draft (``draft.model``'s shape) is distilled from that policy on the same kind of data: soft
   cross-entropy to the policy's distribution for ``draft.model.warmstart_steps`` batches.

Both are saved with ``save_pretrained`` under ``$TRAJKIT_CACHE`` (default ``~/.cache/trajkit``)
``/rl-warmstart/<hash of the configs>/`` and loaded from there next time (a few seconds to minutes to
build on 2 CPU cores, once).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict

import torch

from trajkit.rl.batching import collate, forward_logits, gather_logprobs
from trajkit.rl.codec import ByteCodec
from trajkit.rl.config import ModelConfig, TrainConfig
from trajkit.rl.models import load_path, random_model, window_net
from trajkit.rl.registry import make_task
from trajkit.rl.update import distill_loss

BATCH = 64
VERSION = 1


def cache_dir(cfg: TrainConfig) -> str:
    key = json.dumps({"v": VERSION, "task": asdict(cfg.task), "policy": asdict(cfg.policy),
                      "draft": asdict(cfg.draft.model), "kind": cfg.draft.kind,
                      "window": [cfg.draft.head, cfg.draft.window] if cfg.draft.kind == "window" else None},
                     sort_keys=True)
    root = os.environ.get("TRAJKIT_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "trajkit"))
    return os.path.join(root, "rl-warmstart", hashlib.sha256(key.encode()).hexdigest()[:16])


def _batches(cfg: TrainConfig, steps: int, offset: int):
    """``steps`` collated batches of demonstrations from the task's "warmstart" split."""
    task = make_task(cfg.task, seed=0)
    for step in range(steps):
        prompts = [task.prompt(offset + step * BATCH + i, split="warmstart") for i in range(BATCH)]
        samples = [task.demonstration(p) for p in prompts]
        yield collate(samples, torch.zeros(len(samples)), ByteCodec.pad_id)


def sft(model, cfg: TrainConfig, mc: ModelConfig, teacher=None) -> None:
    """Cross-entropy on demonstrations, or soft cross-entropy to ``teacher`` when given."""
    opt = torch.optim.AdamW(model.parameters(), lr=mc.warmstart_lr, weight_decay=0.0)
    model.train()
    for batch in _batches(cfg, mc.warmstart_steps, offset=0 if teacher is None else 10_000_000):
        logits = forward_logits(model, batch)
        if teacher is None:
            logp = gather_logprobs(logits, batch.input_ids, 1.0)
            loss = -(logp * batch.mask).sum() / batch.mask.sum()
        else:
            with torch.no_grad():
                target = torch.log_softmax(forward_logits(teacher, batch), dim=-1)
            loss = distill_loss(logits, target, batch.mask, 1.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()


def build_pair(cfg: TrainConfig):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.policy.init_seed)
        policy = random_model(cfg.policy)
        sft(policy, cfg, cfg.policy)
        draft = window_net(cfg) if cfg.draft.kind == "window" else random_model(cfg.draft.model)
        sft(draft, cfg, cfg.draft.model, teacher=policy.eval())
    return policy, draft


def warmstart_pair(cfg: TrainConfig):
    """(policy, draft) for ``cfg``'s task, from the cache or built now."""
    path = cache_dir(cfg)
    if not os.path.exists(os.path.join(path, "done")):
        policy, draft = build_pair(cfg)
        tmp = path + f".tmp{os.getpid()}"
        policy.save_pretrained(os.path.join(tmp, "policy"))
        if cfg.draft.kind == "window":
            torch.save(draft.state_dict(), os.path.join(tmp, "draft.pt"))
        else:
            draft.save_pretrained(os.path.join(tmp, "draft"))
        open(os.path.join(tmp, "done"), "w").close()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.exists(path):
            os.replace(tmp, path)
    if cfg.draft.kind == "window":
        draft = window_net(cfg)
        draft.load_state_dict(torch.load(os.path.join(path, "draft.pt")))
    else:
        draft = load_path(os.path.join(path, "draft"))
    return load_path(os.path.join(path, "policy")), draft
