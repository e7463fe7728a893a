"""The optimiser registry: ``optim.name`` -> a builder ``(model or parameters, OptimConfig, lr) -> optimiser``.

Used by the RL trainer (:func:`trajkit.rl.update.make_optimizer`), the benchmarks' arms
(:mod:`trajkit.bench.optim_step`) and the Tinker server's training clients (``adamw`` over each client's adapter
parameters). An optimiser's own settings are its section in :data:`trajkit.optim.config.OPTIONS`, read as
``o.options``; the shared ones (``lr``, ``beta1``, ``beta2``, ``eps``, ``weight_decay``) are ``o``'s.
"""
from __future__ import annotations

import torch

from trajkit.errors import ConfigError
from trajkit.optim.logra import LoGRA
from trajkit.optim.muon import MuonAdamW


def _adamw(model, o, lr: float) -> torch.optim.Optimizer:
    params = list(model.parameters() if isinstance(model, torch.nn.Module) else model)
    kernel = getattr(o.options, "kernel", "auto")
    return torch.optim.AdamW(params, lr=lr, betas=(o.beta1, o.beta2), eps=o.eps, weight_decay=o.weight_decay,
                             **adamw_kernel(params, kernel))


def adamw_kernel(params: list, kernel: str) -> dict:
    """``optim.adamw.kernel`` -> torch AdamW's keywords for ``params`` (:class:`trajkit.optim.config.AdamwOptions`)."""
    if kernel == "foreach":
        return {"foreach": True}
    if kernel == "loop":
        return {"foreach": False}
    why = _no_fused_kernel(params)
    if why is None:
        return {"fused": True}
    if kernel == "fused":
        raise ConfigError(f"optim.adamw.kernel=fused: torch has no fused AdamW for these parameters ({why}); use "
                          "optim.adamw.kernel=auto")
    return {}


def _no_fused_kernel(params: list) -> str | None:
    """Why torch's fused AdamW cannot step ``params``, or None when it can."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # torch built without distributed, or 2.4 (torch.distributed._tensor): no DTensor here
        DTensor = ()
    for p in params:
        if isinstance(p, DTensor):
            return "FSDP2's sharded DTensor parameters"
        if p.device.type not in ("cpu", "cuda"):
            return f"a parameter on {p.device.type}"
        if not p.is_floating_point():
            return f"a {p.dtype} parameter"
    return None


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
