"""How far one optimiser step moves the policy: a first-order prediction of the logits' change, the
second-order KL it implies, and the exact KL to check it against. See docs/optim.md for the derivation.

For token position t with logits ``z_t`` (tempered: the distribution the policy samples from), a step
``theta -> theta + s * Delta`` changes the logits by ``s * dz_t + O(s^2)`` with ``dz_t = J_t Delta`` (a
Jacobian-vector product), and

    KL(p_t || p'_t) = logsumexp(z + s dz) - logsumexp(z) - s E_p[dz]  =  s^2/2 Var_{p_t}(dz_t) + O(s^3).

``dz`` is computed in one forward-mode pass: every sketched linear layer adds the tangent
``Delta W x = -lr D (A x)`` (``A x`` is exactly what the sketch forward computes; no dense ``Delta W`` is
formed) and every other parameter carries its own update as a dual tensor (:func:`dual_parameters`).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.autograd.forward_ad as fwAD


def tangent_kl(logits: torch.Tensor, tangent: torch.Tensor, mask: torch.Tensor) -> tuple[float, float]:
    """``logits, tangent: [B, T, V]``, ``mask: [B, T]`` -> (sum over masked tokens of ½ Var_p(tangent),
    number of masked tokens). ½ Var_p(dz) is the second-order KL(p || softmax(z + dz))."""
    p = torch.softmax(logits.float(), dim=-1)
    tangent = tangent.float()
    centred = tangent - (p * tangent).sum(-1, keepdim=True)
    var = (p * centred.square()).sum(-1)  # [B, T]
    return float((0.5 * var * mask).sum()), float(mask.sum())


def exact_kl(logits_before: torch.Tensor, logits_after: torch.Tensor, mask: torch.Tensor) -> tuple[float, float]:
    """``[B, T, V]`` twice, ``mask: [B, T]`` -> (sum over masked tokens of KL(p_before || p_after), count)."""
    lp = torch.log_softmax(logits_before.float(), dim=-1)
    lq = torch.log_softmax(logits_after.float(), dim=-1)
    kl = (lp.exp() * (lp - lq)).sum(-1)
    return float((kl * mask).sum()), float(mask.sum())


@contextlib.contextmanager
def dual_parameters(model: torch.nn.Module, tangents: dict[torch.Tensor, torch.Tensor]) -> Iterator[None]:
    """Inside a ``fwAD.dual_level``: every parameter in ``tangents`` (keyed by the parameter object) is
    replaced in its module(s) by a dual tensor carrying its tangent; tied parameters are replaced
    everywhere they appear. Restored on exit."""
    duals = {id(p): fwAD.make_dual(p.detach(), t) for p, t in tangents.items()}
    swapped = []
    try:
        for module in model.modules():
            for name, p in list(module._parameters.items()):
                if p is not None and id(p) in duals:
                    swapped.append((module, name, p))
                    module._parameters[name] = duals[id(p)]
        yield
    finally:
        for module, name, p in swapped:
            module._parameters[name] = p
