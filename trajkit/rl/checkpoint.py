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

from trajkit.errors import ConfigError
from trajkit.rl.state import TrainState


def rng_state() -> dict:
    return {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])


def save_checkpoint(state: TrainState, path: str) -> str:
    """Write ``path/state.pt``; returns ``path``."""
    os.makedirs(path, exist_ok=True)
    blob = {"step": state.step, "stream": state.stream.state_dict(), "rng": rng_state(),
            "policy": state.policy.state_dict(), "optimizer": state.optimizer.state_dict(),
            "alarm": state.alarm.state_dict(), "draft": None, "draft_optimizer": None}
    if state.draft is not None:
        blob["draft"] = state.draft.state_dict()
    if state.draft_optimizer is not None:
        blob["draft_optimizer"] = state.draft_optimizer.state_dict()
    from trajkit.traces.atomic import AtomicFile

    with AtomicFile(os.path.join(path, "state.pt"), "checkpoint") as tmp:  # complete, or the old one stays
        torch.save(blob, tmp)
    return path


def load_checkpoint(state: TrainState, path: str) -> None:
    """Restore everything :func:`save_checkpoint` wrote into an already built ``state``."""
    file = os.path.join(path, "state.pt")
    if not os.path.exists(file):
        raise ConfigError(f"checkpoint.resume_from: no state.pt in {path!r}")
    blob = torch.load(file, weights_only=False)
    state.policy.load_state_dict(blob["policy"])
    state.optimizer.load_state_dict(blob["optimizer"])
    if blob["draft"] is not None and state.draft is not None:
        state.draft.load_state_dict(blob["draft"])
    if blob["draft_optimizer"] is not None and state.draft_optimizer is not None:
        state.draft_optimizer.load_state_dict(blob["draft_optimizer"])
    state.stream.load_state_dict(blob["stream"])
    state.alarm.load_state_dict(blob["alarm"])
    state.step = blob["step"]
    set_rng_state(blob["rng"])
