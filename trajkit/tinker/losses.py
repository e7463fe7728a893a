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
- ``dro``: ``-sum(logp * A - beta/2 * (logp - logprobs)^2)`` (Richemond et al. 2024's direct reward
  optimisation as Tinker's "DRO" page writes it; the soft advantages are the client's). Tinker's page
  passes ``beta`` in ``loss_fn_config`` and publishes no default, so this server requires it.
- ``gspo``: GSPO-token (Zheng et al. 2025, as Tinker's "GSPO" page defines it): the sequence log-ratio
  ``r = mean over sequence_ratio_mask != 0 of sg(logp) - logprobs``, every token's ratio
  ``s_t = exp(r + logp - sg(logp))`` (the sequence ratio's value, its own token's gradient), then PPO's
  clipped objective ``-sum(min(s_t A, clip(s_t, low, high) A))``. The mask is a required input; the
  thresholds (``clip_low_threshold``, ``clip_high_threshold``, as for ``ppo``) are required too, because
  GSPO's range (the paper's 1 - 3e-4 .. 1 + 4e-4) is far from PPO's and Tinker publishes no default.

``custom`` needs nothing here: the SDK's ``forward_backward_custom`` with a Python callable runs a
``cross_entropy`` forward (``forward_only``), differentiates the user's loss on the returned log-probs on
the client, and sends ``cross_entropy`` with ``weights = -dC/dlogp`` (tinker 0.38.0,
``TrainingClient._compute_custom_loss``). A server-side traced loss (``loss_fn="custom"`` with a
``loss_id`` from ``create_custom_loss``) is not supported: :class:`UnknownLoss` says so.
``stable_reinforce`` has no published definition (the SDK only lists the name), so it is refused too.
"""
from __future__ import annotations

from typing import Callable

import torch

from trajkit.errors import InputError
from trajkit.rl.losses import clipped_surrogate

Loss = Callable[[torch.Tensor, dict, dict], torch.Tensor]
KNOWN_NOT_IMPLEMENTED = {"stable_reinforce": "has no published definition to implement",
                         "custom": "a server-side traced loss, which this server does not run; forward_backward_custom with a Python callable works (it needs only cross_entropy)"}


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
    return clipped_surrogate(_ratio(logp, inputs), inputs["advantages"], low, high)[0].sum()


def cispo(logp: torch.Tensor, inputs: dict, config: dict) -> torch.Tensor:
    low, high = _thresholds(config)
    weight = _ratio(logp, inputs).clamp(low, high).detach()
    return -(weight * inputs["advantages"] * logp).sum()


def _required(config: dict, key: str, loss: str) -> float:
    if key not in config:
        raise InputError(f"loss_fn {loss!r} needs loss_fn_config[{key!r}] (Tinker publishes no default for it)",
                         field="loss_fn_config")
    try:
        return float(config[key])
    except (TypeError, ValueError):
        raise InputError(f"loss_fn_config[{key!r}] must be a number, got {config[key]!r}",
                         field="loss_fn_config") from None


def dro(logp: torch.Tensor, inputs: dict, config: dict) -> torch.Tensor:
    beta = _required(config, "beta", "dro")
    penalty = (logp - inputs["logprobs"]).square()
    return -(logp * inputs["advantages"] - 0.5 * beta * penalty).sum()


def gspo(logp: torch.Tensor, inputs: dict, config: dict) -> torch.Tensor:
    low, high = (_required(config, k, "gspo") for k in ("clip_low_threshold", "clip_high_threshold"))
    marked = inputs["sequence_ratio_mask"] != 0
    if not marked.any():
        raise InputError("loss_fn 'gspo': sequence_ratio_mask marks no token (the sequence ratio is a mean over "
                         "the marked tokens)", field="loss_fn_inputs")
    log_ratio = (logp.detach() - inputs["logprobs"])[marked].mean()
    ratio = torch.exp(log_ratio + logp - logp.detach())
    return clipped_surrogate(ratio, inputs["advantages"], low, high)[0].sum()


LOSSES: dict[str, Loss] = {"cross_entropy": cross_entropy, "importance_sampling": importance_sampling,
                           "ppo": ppo, "cispo": cispo, "dro": dro, "gspo": gspo}
# the loss_fn_inputs each loss reads besides target_tokens
INPUTS = {"cross_entropy": ("weights",), "importance_sampling": ("logprobs", "advantages"),
          "ppo": ("logprobs", "advantages"), "cispo": ("logprobs", "advantages"),
          "dro": ("logprobs", "advantages"), "gspo": ("logprobs", "advantages", "sequence_ratio_mask")}


def loss_fn(name: str) -> Loss:
    """The loss called ``name``, or :class:`UnknownLoss` saying which ones this server runs."""
    if name in LOSSES:
        return LOSSES[name]
    known = (f"a Tinker loss trajkit does not implement: {KNOWN_NOT_IMPLEMENTED[name]}" if name in KNOWN_NOT_IMPLEMENTED
             else "not a Tinker loss")
    raise UnknownLoss(f"loss_fn {name!r} is {known}; this server runs {', '.join(LOSSES)}", field="loss_fn")
