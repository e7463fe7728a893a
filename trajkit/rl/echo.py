"""ECHO's auxiliary loss: cross-entropy of the policy on the environment's observation tokens of its own rollouts.

prime-rl's ECHO trains the policy to predict what the environment answers (tool outputs), beside the
policy-gradient term: it gives a dense gradient on every rollout, also where a GRPO group's rewards all agree
and its advantages are 0. The loss is the mean negative log-likelihood, under the current policy, of the
*forced* tokens inside the completion: a stitched agent sample (:mod:`trajkit.gateway.stitch`) is the prompt,
then the completion, in which the sampled spans (``loss_mask`` 1) alternate with forced ones (``loss_mask`` 0:
tool results, user turns, the chat template's glue between turns). Counted: every position after the row's
first sampled token that is not itself sampled, up to the row's last real token. Never counted: the prompt
(everything before the first sampled token, including a completion's leading forced tokens, which the policy
did not see itself produce), padding, and the sampled tokens (the policy-gradient term's). A single-turn
sample has no such token: its ECHO term is 0. Deviation: trajkit's forced spans include the template glue
as well as the tool output proper (the stitched sample does not tell them apart).

The log-probs are the policy-gradient term's own (at the rollout temperature; no second forward). The loss
of a slice is ``-sum(logp * obs) / N_obs``, ``N_obs`` the *slice's* count of observation tokens, so summing
micro-batches gives the slice's value exactly; it is added to the loss with weight ``loss.echo_coef``.
"""
from __future__ import annotations

import torch


def observation_mask(mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``mask: [B, T]`` (1 at sampled tokens, next-token space), ``lengths: [B]`` real tokens per row ->
    ``[B, T]``, 1 at each forced completion token after the row's first sampled one.

    Next-token entry ``t`` predicts token ``t + 1``, so a row of ``n`` real tokens has entries ``0..n-2``.

    >>> observation_mask(torch.tensor([[0., 1., 1., 0., 0., 1., 0., 0.]]), torch.tensor([8])).tolist()
    [[0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0]]
    """
    t = mask.shape[1]
    sampled = mask > 0
    pos = torch.arange(t, device=mask.device)
    first = torch.where(sampled.any(1), sampled.to(torch.int8).argmax(1), torch.full_like(lengths, t).to(mask.device))
    inside = (pos > first.unsqueeze(1)) & (pos < (lengths.to(mask.device) - 1).unsqueeze(1))
    return (inside & ~sampled).to(mask.dtype)


def echo_loss(logp: torch.Tensor, obs: torch.Tensor, num_obs: int) -> torch.Tensor:
    """``logp, obs: [B, T]`` -> ``-sum(logp * obs) / num_obs`` (``num_obs``: the whole slice's count; 0 when it
    has none)."""
    assert logp.shape == obs.shape, (tuple(logp.shape), tuple(obs.shape))
    return -(logp * obs.to(logp.dtype)).sum() / max(num_obs, 1)
