"""Build the policy, reference and draft models from a :class:`ModelConfig`.

``random``: a tiny Llama of the configured shape over the byte vocabulary (:mod:`trajkit.rl.codec`),
reproducible from ``init_seed``. ``path``: a local Hugging Face directory (never a hub download).
``task_warmstart``: the task's warm-started pair, built once by supervised fine-tuning and cached
(:mod:`trajkit.rl.warmstart`).
"""
from __future__ import annotations

import copy

import torch

from trajkit.engine.tiny import TinySpec, build_model
from trajkit.errors import ConfigError
from trajkit.rl.codec import ByteCodec
from trajkit.rl.config import ModelConfig, TrainConfig


def tiny_spec(cfg: ModelConfig, vocab_size: int) -> TinySpec:
    return TinySpec(vocab_size=vocab_size, hidden_size=cfg.hidden_size, num_layers=cfg.num_layers,
                    num_heads=cfg.num_heads, num_kv_heads=cfg.num_heads,
                    intermediate_size=cfg.intermediate_size, max_positions=1024)


def random_model(cfg: ModelConfig, vocab_size: int = ByteCodec.vocab_size):
    return build_model(tiny_spec(cfg, vocab_size), seed=cfg.init_seed)


def window_net(cfg: TrainConfig, vocab_size: int = ByteCodec.vocab_size):
    from trajkit.rl.window_draft import WindowDraftNet

    d = cfg.draft.model
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(d.init_seed)
        return WindowDraftNet(vocab_size, d.hidden_size, d.intermediate_size, cfg.draft.head, cfg.draft.window)


def load_path(path: str):
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    except OSError as exc:
        raise ConfigError(f"policy.path: cannot load a local model from {path!r} ({exc})") from exc


def build_models(cfg: TrainConfig):
    """-> (policy, draft or None), both in train mode on CPU/float32."""
    if cfg.policy.source == "task_warmstart":
        from trajkit.rl.warmstart import warmstart_pair

        policy, draft = warmstart_pair(cfg)
    else:
        policy = load_path(cfg.policy.path) if cfg.policy.source == "path" else random_model(cfg.policy)
        draft = None
        if cfg.draft.kind == "model":
            d = cfg.draft.model
            draft = load_path(d.path) if d.source == "path" else random_model(d, policy.config.vocab_size)
        elif cfg.draft.kind == "window":
            draft = window_net(cfg, policy.config.vocab_size)
    if cfg.draft.kind not in ("model", "window"):
        draft = None
    return policy.train(), (draft.train() if draft is not None else None)


def frozen_copy(model):
    """A detached copy for inference (engine) or reference use."""
    out = copy.deepcopy(model).eval()
    for p in out.parameters():
        p.requires_grad_(False)
    return out
