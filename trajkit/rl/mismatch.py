"""Train/rollout mismatch: the engine's log-probs against the policy's recomputed log-probs.

After a correct weight sync the engine samples from the same weights the trainer holds, so on the same
tokens the two log-probs differ only by numerics (KV-cached vs full forward, padding, dtype): on CPU in
float32 that is ~1e-6. A stale inference copy (a broken sync), a wrong temperature or a tokenisation
slip shows up as a jump. Per step we log, over sampled tokens (``loss_mask`` 1):

- ``mean_abs``: mean |log p_policy - log q_engine|;
- ``kl``: the k3 estimate of KL(q_engine || p_policy) from samples of q: ``mean(r - 1 - log r)`` with
  ``r = p / q`` (Schulman 2020; unbiased and non-negative);
- ``max_abs``.

:class:`MismatchAlarm` warns loudly (``MismatchWarning``) when ``mean_abs`` exceeds an absolute
threshold, or jumps to ``jump_factor`` times the median of the previous steps (and past ``min_jump``).
The warning is the one report of an alarm (besides ``mismatch/alarm`` = 1 in the step's metrics): it is
typed, so ``warnings`` filters and ``pytest.warns`` see it, and ``logging.captureWarnings(True)`` routes
it to logging. (It used to be logged as well, which printed every alarm twice.)
"""
from __future__ import annotations

import statistics
import warnings

import torch


MISMATCH_KEYS = ("mean_abs", "kl", "max_abs")  # what mismatch_metrics returns


class MismatchWarning(UserWarning):
    """The engine's log-probs no longer match the policy's: check the weight sync."""


def mismatch_metrics(engine_logp: torch.Tensor, policy_logp: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """``engine_logp, policy_logp, mask: [B, T]`` -> {mean_abs, kl, max_abs} over masked tokens."""
    assert engine_logp.shape == policy_logp.shape == mask.shape, \
        (tuple(engine_logp.shape), tuple(policy_logp.shape), tuple(mask.shape))
    sel = mask.bool()
    if not bool(sel.any()):
        return {"mean_abs": 0.0, "kl": 0.0, "max_abs": 0.0}
    delta = (policy_logp - engine_logp)[sel].to(torch.float64)  # log r, r = p / q
    return {"mean_abs": float(delta.abs().mean()), "kl": float((torch.exp(delta) - 1.0 - delta).mean()),
            "max_abs": float(delta.abs().max())}


class MismatchAlarm:
    """Keeps the history of ``mean_abs`` and fires on an absolute breach or a jump."""

    def __init__(self, abs_threshold: float, jump_factor: float, min_jump: float):
        self.abs_threshold, self.jump_factor, self.min_jump = abs_threshold, jump_factor, min_jump
        self.history: list[float] = []

    def check(self, metrics: dict[str, float], step: int) -> bool:
        """Record this step's metrics; warn and return True when the gap breaches or jumps."""
        value = metrics["mean_abs"]
        base = statistics.median(self.history) if self.history else None
        self.history.append(value)
        breach = value > self.abs_threshold
        jump = base is not None and value > self.min_jump and value > self.jump_factor * base
        if not (breach or jump):
            return False
        why = f"above {self.abs_threshold:g}" if breach else f"{value / max(base, 1e-30):.0f}x the median {base:.2e}"
        message = (f"!!! TRAIN/ROLLOUT MISMATCH at step {step}: mean |dlogp| = {value:.3e} ({why}), "
                   f"KL estimate {metrics['kl']:.3e}. The engine is not sampling from the policy being "
                   "trained: check the weight sync (stale weights), the rollout temperature and tokenisation.")
        warnings.warn(MismatchWarning(message), stacklevel=2)
        return True

    def state_dict(self) -> dict:
        return {"history": list(self.history)}

    def load_state_dict(self, state: dict) -> None:
        self.history = list(state["history"])
