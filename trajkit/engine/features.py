"""The target's hidden states handed to a drafter that drafts from them (an EAGLE head).

A drafter with a ``feature_layers`` attribute asks the engine for the target's hidden states at those
layers. The engine's target ``KVState`` then captures them from the forwards it runs anyway (prefill and
verification: ``output_hidden_states`` on the same call, no extra target pass) and calls the drafter's
``observe(features, rows)`` with, per row, the features of exactly the tokens the target's cache gained:

- after a prefill, one ``[n_b, F]`` per prompt for its cached tokens; tokens served by the prefix cache
  were not computed, so their features are zeros (the head still drafts, from less information);
- after a verification round, the features of the row's last token and its accepted drafts (the first
  ``accepted + 1`` positions of the ``[B, w + 1, F]`` the verification forward returned).
"""
from __future__ import annotations

import torch


def feature_layers(drafter) -> tuple[int, ...] | None:
    """The hidden-state indices ``drafter`` drafts from (None: it needs none)."""
    layers = getattr(drafter, "feature_layers", None)
    return tuple(layers) if layers else None


def prefill_features(state, prompts: list[list[int]]) -> list[torch.Tensor]:
    """Per row, the features ``[len(prompt), F]`` of ``prompts`` (what ``state`` just prefilled); the rows'
    leading tokens that the forward did not compute (prefix-cache hits) get zeros."""
    feats, valid = state.features, state.feature_valid
    width = len(state.capture) * _hidden_size(state.model)
    out = []
    for b, prompt in enumerate(prompts):
        if feats is None:
            computed = torch.zeros(0, width, device=state.device)
        else:
            computed = feats[b] if valid is None else feats[b][valid[b]]
            computed = computed[-len(prompt):] if prompt else computed[:0]
        missing = len(prompt) - computed.shape[0]
        if missing:
            computed = torch.cat([computed.new_zeros(missing, computed.shape[1]), computed])
        out.append(computed)
    return out


def observe_prefill(drafter, state, prompts: list[list[int]], rows: list[int] | None = None) -> None:
    """Hand ``drafter`` the features of a prefill of ``prompts`` (no-op for drafters that need none)."""
    if feature_layers(drafter) is not None:
        drafter.observe(prefill_features(state, prompts), rows)


def observe_round(drafter, state, kept: list[int]) -> None:
    """Hand ``drafter`` the features of the first ``kept[b]`` tokens each row kept of the last forward."""
    if feature_layers(drafter) is not None:
        drafter.observe([state.features[b, :n] for b, n in enumerate(kept)])


def _hidden_size(model) -> int:
    return int(model.config.get_text_config(decoder=True).hidden_size)
