"""The optimiser registry: ``optim.name`` -> a builder ``(model or parameters, OptimConfig, lr) -> optimiser``.

Used by the RL trainer (:func:`trajkit.rl.update.make_optimizer`), the benchmarks' arms
(:mod:`trajkit.bench.optim_step`) and the Tinker server's training clients (``adamw`` over each client's adapter
parameters). An optimiser's own settings are its section in :data:`trajkit.optim.config.OPTIONS`, read as
``o.options``; the shared ones (``lr``, ``beta1``, ``beta2``, ``eps``, ``weight_decay``) are ``o``'s.
"""
from __future__ import annotations

import torch

from trajkit.optim.logra import LoGRA
from trajkit.optim.muon import MuonAdamW


def _adamw(model, o, lr: float) -> torch.optim.Optimizer:
    params = model.parameters() if isinstance(model, torch.nn.Module) else model
    return torch.optim.AdamW(params, lr=lr, betas=(o.beta1, o.beta2), eps=o.eps, weight_decay=o.weight_decay)


def _logra(model, o, lr: float) -> torch.optim.Optimizer:
    s = o.options
    return LoGRA(model, lr=lr, rank=s.rank, distribution=s.distribution, seed=s.seed, beta2=o.beta2, eps=s.eps,
                 weight_decay=o.weight_decay, kl_budget=s.kl_budget or None, targets=s.targets,
                 embeddings=s.embeddings, native_betas=(o.beta1, o.beta2))


def _muon(model, o, lr: float) -> torch.optim.Optimizer:
    s = o.options
    return MuonAdamW(model, lr=lr, weight_decay=o.weight_decay, betas=(o.beta1, o.beta2), eps=o.eps,
                     muon_lr=s.lr or lr, muon_weight_decay=s.weight_decay, momentum=s.momentum,
                     nesterov=s.nesterov, adjust_lr=s.adjust_lr, ns_steps=s.ns_steps)


# each kind's own settings: trajkit.optim.config.OPTIONS (without torch); the names trajkit ships: BUILT_IN there
OPTIMIZERS = {"adamw": _adamw, "logra": _logra, "muon": _muon}
