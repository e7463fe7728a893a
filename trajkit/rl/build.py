"""Build the tokenizer, policy and draft of a run from its :class:`TrainConfig`.

Model sources (``policy.source``): ``random``, a tiny Llama of the configured shape
(:func:`trajkit.models.spec.build_model`) over the byte vocabulary; ``path``, a local Hugging Face folder
(:func:`trajkit.models.load.load_model`, never a hub download) with its own tokenizer; ``hub``, the same
from the local Hugging Face cache (:mod:`trajkit.models.hub`);
``task_warmstart``, a random policy fine-tuned briefly on the task's demonstrations and cached
(:mod:`trajkit.recipes.warmstart`). The draft is built by its kind in the drafter registry
(:mod:`trajkit.engine.drafters.registry`): fresh weights of ``draft.model``'s shape, or
``draft.model.path``; kinds without weights give no network.

``policy.rope_scaling`` (YaRN, :mod:`trajkit.models.rope`) is written into the policy's config: a
folder's policy is loaded from the scaled config, any other is rebuilt from it with the same weights (the
warm start is trained and cached unscaled); ``draft.model.rope_scaling`` does the same for an HF draft.

Both are built on the CPU in float32 (a warm start is cached that way) and then moved to
``policy.device``; the policy keeps float32 master weights whatever ``policy.dtype`` says (mixed
precision, :mod:`trajkit.rl.precision`). ``optim.gradient_checkpointing`` turns on Hugging Face's
activation checkpointing on the policy: it acts only in forwards that build a graph (the update), not in
the no-grad logprob stage or the engine's eval-mode copy. ``policy.lora.rank`` > 0 wraps the built policy
in peft LoRA adapters (:mod:`trajkit.rl.lora`; not part of the warm start's cache key).
"""
from __future__ import annotations

import copy
from dataclasses import asdict

import torch

from trajkit.engine.drafters.registry import DraftShape, draft_kind
from trajkit.errors import ConfigError
from trajkit.models.fit import Schedule
from trajkit.models.load import empty_model, load_model, load_tokenizer
from trajkit.models.logprobs import check_chunkable
from trajkit.models.rope import needs_rescaling, rescaled
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.rl.batching import collate
from trajkit.rl.config import ModelConfig, TrainConfig
from trajkit.rl.precision import resolve_device
from trajkit.envs.registry import make_task

WARMSTART_BATCH = 64
# ModelConfig fields that say where a model runs, or what is applied after it is built (not what it is)
PLACEMENT_KEYS = ("device", "dtype", "rope_scaling", "fsdp", "lora")


def policy_folder(mc: ModelConfig) -> str | None:
    """The local HF folder of a ``path`` or ``prepared`` model (a prepared one is built on first use)."""
    if mc.source == "path":
        return mc.path
    if mc.source == "hub":
        from trajkit.models.hub import resolve_hub_model

        return resolve_hub_model(mc.path)
    if mc.source == "prepared":
        from trajkit.recipes.prepared import PREPARE

        return str(PREPARE[mc.path]())
    return None


def build_tokenizer(cfg: TrainConfig):
    """The policy folder's tokenizer for a ``path``/``prepared`` policy, else the byte tokenizer."""
    folder = policy_folder(cfg.policy)
    if folder is not None:
        return load_tokenizer(folder, what="policy.path")
    return byte_tokenizer()


def random_model(cfg: ModelConfig, vocab_size: int):
    spec = TinySpec(vocab_size=vocab_size, hidden_size=cfg.hidden_size, num_layers=cfg.num_layers,
                    num_heads=cfg.num_heads, num_kv_heads=cfg.num_heads,
                    intermediate_size=cfg.intermediate_size, max_positions=1024)
    return build_model(spec, seed=cfg.init_seed)


def draft_shape(cfg: TrainConfig) -> DraftShape:
    m = cfg.draft.model
    return DraftShape(hidden_size=m.hidden_size, num_layers=m.num_layers, num_heads=m.num_heads,
                      intermediate_size=m.intermediate_size, init_seed=m.init_seed, head=cfg.draft.head,
                      window=cfg.draft.window)


def build_draft(cfg: TrainConfig, vocab_size: int, policy=None):
    """Fresh (or loaded) draft weights for ``draft.kind``; None for kinds without weights. ``policy``: the
    target of a kind that drafts from its hidden states (``eagle``: bound to the training policy here, to
    the engine's inference copy by the rollout)."""
    kind = draft_kind(cfg.draft.kind)
    if kind is None:
        return None
    folder = policy_folder(cfg.draft.model)
    net = kind.load(folder, target=policy) if folder is not None else kind.build(vocab_size, draft_shape(cfg),
                                                                                   target=policy)
    if cfg.draft.model.rope_scaling.active:
        if not hasattr(getattr(net, "config", None), "max_position_embeddings"):
            raise ConfigError(f"draft.model.rope_scaling: draft.kind={cfg.draft.kind} is not a Hugging Face "
                              "RoPE model; drop draft.model.rope_scaling")
        net = rescaled(net, cfg.draft.model.rope_scaling)
    return net


def build_models(cfg: TrainConfig, tokenizer, policy=None):
    """-> (policy, draft or None), both in train mode on ``policy.device``; a given ``policy`` module (the
    Python API's ``Trainer(model=...)``) replaces the one ``cfg`` describes."""
    vocab = len(tokenizer)
    if policy is not None:
        if needs_rescaling(policy, cfg.policy.rope_scaling):
            raise ConfigError("policy.rope_scaling with a given model: pass it scaled (trajkit.models.rope.rescaled"
                              "(model, scaling), or load_model(folder, rope_scaling=scaling)); the trainer does "
                              "not swap out a module you hold")
        draft = build_draft(cfg, policy.config.vocab_size, policy)
    elif cfg.policy.source == "task_warmstart":
        policy, draft = _warmstart(cfg, tokenizer)
    else:
        folder = policy_folder(cfg.policy)
        policy = (load_model(folder, what="policy.path", rope_scaling=cfg.policy.rope_scaling) if folder is not None
                  else random_model(cfg.policy, vocab))
        draft = build_draft(cfg, policy.config.vocab_size, policy)
    policy = rescaled(policy, cfg.policy.rope_scaling)  # a no-op for a folder's policy (scaled as it loaded)
    device = resolve_device(cfg.policy.device)
    policy = policy.to(device=device, dtype=torch.float32)
    if cfg.policy.lora.rank:
        from trajkit.rl.lora import wrap

        policy = wrap(policy, cfg.policy.lora)  # base frozen, adapters trainable (trajkit.rl.lora)
    if cfg.optim.gradient_checkpointing:
        enable_activation_checkpointing(policy)
    if cfg.optim.logits_chunk:
        check_chunkable(policy)  # a model whose logits are not lm_head(hidden) fails here, not at step 1
    if draft is not None:
        draft = draft.to(device).train()
    return policy.train(), draft


def policy_skeleton(cfg: TrainConfig, tokenizer):
    """The policy :func:`build_models` builds, on the meta device (no storage, no values): what a sharded rank
    other than 0 builds before it receives its shard of rank 0's weights (:func:`trajkit.rl.fsdp.
    load_from_rank0`), so that no such rank ever holds the whole model. A warm start's architecture is its
    random model's (the weights come from rank 0)."""
    if cfg.policy.lora.rank:
        raise ConfigError("policy.lora: a policy skeleton has no adapters; set policy.lora.rank=0")
    folder = policy_folder(cfg.policy)
    if folder is not None:
        policy = empty_model(folder, what="policy.path", rope_scaling=cfg.policy.rope_scaling)
    else:
        with torch.device("meta"):
            policy = rescaled(random_model(cfg.policy, len(tokenizer)), cfg.policy.rope_scaling)
    if cfg.optim.gradient_checkpointing:
        enable_activation_checkpointing(policy)
    return policy.train()


def enable_activation_checkpointing(model) -> None:
    """Hugging Face activation checkpointing on ``model`` (``activation_checkpointing_enable`` in recent
    transformers 5.x, ``gradient_checkpointing_enable`` before), non-reentrant."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ConfigError(f"optim.gradient_checkpointing: {type(model).__name__} does not support "
                          "activation checkpointing; set optim.gradient_checkpointing=false")
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def _warmstart(cfg: TrainConfig, tokenizer):
    from trajkit.recipes.warmstart import WarmStart, warm_start

    vocab = len(tokenizer)
    kind = draft_kind(cfg.draft.kind)
    draft = kind.build(vocab, draft_shape(cfg)) if kind is not None and kind.trainable else None
    # device and dtype do not change the warm start (built on the CPU in float32): keep them out of its key
    policy_key = {k: v for k, v in asdict(cfg.policy).items() if k not in PLACEMENT_KEYS}
    key = {"task": asdict(cfg.task), "policy": policy_key, "vocab": vocab,
           "draft": [cfg.draft.kind, asdict(draft_shape(cfg))] if draft is not None else None}
    spec = WarmStart(key, random_model(cfg.policy, vocab), _sft_schedule(cfg.policy), draft, kind,
                     _sft_schedule(cfg.draft.model))
    return warm_start(spec, lambda offset: _demonstrations(cfg, tokenizer, offset))


def _sft_schedule(mc: ModelConfig) -> Schedule:
    """Constant-rate AdamW without weight decay, clipped at 1."""
    return Schedule(mc.warmstart_steps, mc.warmstart_lr, warmup=0, min_lr_ratio=1.0, weight_decay=0.0,
                    betas=(0.9, 0.999))


def _demonstrations(cfg: TrainConfig, tokenizer, offset: int):
    """Endless collated batches of demonstrations from the task's "warmstart" split."""
    task = make_task(cfg.task, 0, tokenizer)
    step = 0
    while True:
        prompts = [task.prompt(offset + step * WARMSTART_BATCH + i, split="warmstart")
                   for i in range(WARMSTART_BATCH)]
        samples = [task.demonstration(p) for p in prompts]
        yield collate(samples, torch.zeros(len(samples)), tokenizer.pad_token_id)
        step += 1


def frozen_copy(model):
    """A detached copy for inference (engine) or reference use."""
    out = copy.deepcopy(model).eval()
    for p in out.parameters():
        p.requires_grad_(False)
    return out
