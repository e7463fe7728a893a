"""The Tinker API's built-in losses as pure tensor functions over one datum.

Tinker's losses (its docs, "Loss functions"; names as the SDK 0.38.0 sends them in ``loss_fn``) are sums
over the datum's tokens, not means: the caller weights and normalises. Every loss gets ``logp: [N]``,
the current policy's log-prob of ``target_tokens`` at each position (with grad), and the datum's
``loss_fn_inputs`` as float32 tensors ``[N]``:

- ``cross_entropy``: ``-sum(weights * logp)``.
- ``importance_sampling``: ``-sum(ratio * advantages)``, ``ratio = exp(logp - logprobs)`` with
  ``logprobs`` the sampler's.
- ``ppo``: ``-sum(min(ratio * A, clip(ratio, clip_low_threshold, clip_high_threshold) * A))``, the
  thresholds from ``loss_fn_config`` (default 0.8 and 1.2, Schulman et al. 2017's epsilon 0.2).
- ``cispo``: ``-sum(sg(clip(ratio, low, high)) * A * logp)`` (MiniMax-M1's clipped IS-weight policy
  gradient; same thresholds and defaults as ``ppo``).

``dro``, ``gspo``, ``stable_reinforce`` and ``custom`` are not implemented here; asking for one is the
user error :class:`UnknownLoss` naming those that are.
"""
from __future__ import annotations

from typing import Callable

import torch

from trajkit.errors import InputError

Loss = Callable[[torch.Tensor, dict, dict], torch.Tensor]
KNOWN_NOT_IMPLEMENTED = ("dro", "gspo", "stable_reinforce", "custom")


class UnknownLoss(InputError):
    """A ``loss_fn`` this server does not run."""


def _ratio(logp: torch.Tensor, inputs: dict) -> torch.Tensor:
    return torch.exp(logp - inputs["logprobs"])


def cross_entropy(logp: torch.Tensor, inputs: dict, config: dict) -> torch.Tensor:
    return -(inputs["weights"] * logp).sum()


def importance_sampling(logp: torch.Tensor, inputs: dict, config: dict) -> torch.Tensor:
    return -(_ratio(logp, inputs) * inputs["advantages"]).sum()


def _thresholds(config: dict) -> tuple[float, float]:
    return float(config.get("clip_low_threshold", 0.8)), float(config.get("clip_high_threshold", 1.2))


def ppo(logp: torch.Tensor, inputs: dict, config: dict) -> torch.Tensor:
    low, high = _thresholds(config)
    ratio, adv = _ratio(logp, inputs), inputs["advantages"]
    return -torch.minimum(ratio * adv, ratio.clamp(low, high) * adv).sum()


def cispo(logp: torch.Tensor, inputs: dict, config: dict) -> torch.Tensor:
    low, high = _thresholds(config)
    weight = _ratio(logp, inputs).clamp(low, high).detach()
    return -(weight * inputs["advantages"] * logp).sum()


LOSSES: dict[str, Loss] = {"cross_entropy": cross_entropy, "importance_sampling": importance_sampling,
                           "ppo": ppo, "cispo": cispo}
# the loss_fn_inputs each loss reads besides target_tokens
INPUTS = {"cross_entropy": ("weights",), "importance_sampling": ("logprobs", "advantages"),
          "ppo": ("logprobs", "advantages"), "cispo": ("logprobs", "advantages")}


def loss_fn(name: str) -> Loss:
    """The loss called ``name``, or :class:`UnknownLoss` saying which ones this server runs."""
    if name in LOSSES:
        return LOSSES[name]
    known = "a Tinker loss trajkit does not implement yet" if name in KNOWN_NOT_IMPLEMENTED else "not a Tinker loss"
    raise UnknownLoss(f"loss_fn {name!r} is {known}; this server runs {', '.join(LOSSES)}", field="loss_fn")
