"""Checkpoints that make a resumed run reproduce the next step exactly.

A checkpoint directory holds ``state.pt`` with: the policy, its AdamW state, the draft and its optimiser
(when distilled), the prompt stream's cursor, the step counter, the mismatch alarm's history, and the
global RNG states (torch, Python ``random``, numpy). Rollout randomness does not come from the global
RNGs: each step's sampling seed is a function of (run seed, step), so restoring the step counter restores
it. The reference model is the initial policy and is rebuilt, not saved.
"""
from __future__ import annotations

import os
import random

import numpy as np
import torch


def rng_state() -> dict:
    return {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])


def save_checkpoint(trainer, path: str) -> str:
    """Write ``path/state.pt``; returns ``path``."""
    os.makedirs(path, exist_ok=True)
    state = {"step": trainer.step, "stream": trainer.stream.state_dict(), "rng": rng_state(),
             "policy": trainer.policy.state_dict(), "optimizer": trainer.optimizer.state_dict(),
             "alarm": trainer.alarm.state_dict(), "draft": None, "draft_optimizer": None}
    if trainer.draft is not None:
        state["draft"] = trainer.draft.state_dict()
    if trainer.draft_optimizer is not None:
        state["draft_optimizer"] = trainer.draft_optimizer.state_dict()
    torch.save(state, os.path.join(path, "state.pt"))
    return path


def load_checkpoint(trainer, path: str) -> None:
    """Restore everything :func:`save_checkpoint` wrote into an already built ``trainer``."""
    from trajkit.errors import ConfigError

    file = os.path.join(path, "state.pt")
    if not os.path.exists(file):
        raise ConfigError(f"checkpoint.resume_from: no state.pt in {path!r}")
    state = torch.load(file, weights_only=False)
    trainer.policy.load_state_dict(state["policy"])
    trainer.optimizer.load_state_dict(state["optimizer"])
    if state["draft"] is not None and trainer.draft is not None:
        trainer.draft.load_state_dict(state["draft"])
    if state["draft_optimizer"] is not None and trainer.draft_optimizer is not None:
        trainer.draft_optimizer.load_state_dict(state["draft_optimizer"])
    trainer.stream.load_state_dict(state["stream"])
    trainer.alarm.load_state_dict(state["alarm"])
    trainer.step = state["step"]
    set_rng_state(state["rng"])
