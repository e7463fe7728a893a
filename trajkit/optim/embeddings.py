"""The vocabulary matrices under LoGRA: their exact gradient, accumulated in place, stepped by RowAdam.

LoGRA sketches the attention and MLP projections; the input embedding and the output layer stay dense.
On a small model they are much of what is left: SmolLM2-135M's tied 49,152 x 576 embedding holds 28 M of
its 135 M weights. Under a nested AdamW it costs a float32 gradient plus two moments (340 MiB), and every
backward builds two more full-size gradients before they reach ``.grad``: the output layer's ``Hᵀ X`` and
the lookup's dense scatter (autograd sums them in a buffer, then adds the sum to ``.grad``).

With ``LoGRA(embeddings="rows")`` (the default) these weights get instead:

- **in-place accumulation.** Their modules' ``forward`` (when it is ``nn.Embedding``'s or ``nn.Linear``'s
  own: a subclass with its own forward keeps it, and autograd's gradient) is replaced on the instance (as
  the sketch hooks do) by a custom autograd function whose backward adds straight into ``weight.grad``:
  one ``addmm_`` of ``Hᵀ X`` for the output layer, one ``index_add_`` of the looked-up rows for the
  embedding (skipping ``padding_idx`` like ``nn.Embedding``). In float32 no other vocabulary-sized tensor
  is formed (under autocast the backward also casts the weight to the output gradient's dtype for
  ``H W``): the function returns no gradient for the weight, so autograd builds nothing of its own. The weight keeps
  ``requires_grad=True``, so code that reads it directly rather than calling the module (TRL's fused LM
  head computes log-probs from ``lm_head.weight``; Liger-style fused cross-entropy does too) still gets its
  gradient from autograd, added into the same ``weight.grad``: nothing is dropped, only that path's
  memory saving is lost. ``weight.grad`` is an ordinary gradient for clipping, ``GradScaler.unscale_`` and
  micro-batch accumulation, but the hooked parts reach it only through ``.backward()``: ``autograd.grad``,
  ``torch.func.functional_call`` and tensor hooks on these weights do not see them.
- **RowAdam's state.** One second moment per row (per token, ``[V, 1]``), no first moment, the direction
  ``D = G / row RMS`` of the dense gradient (:func:`trajkit.optim.row_adam.row_adam_direction`, computed in
  place over ``weight.grad``), and ``Delta W = -lr D``: the per-row normalisation LoGRA applies to its
  sketches, here on the exact gradient.

``embeddings="adamw"`` leaves them to the nested AdamW, as the paper's description does (see docs/optim.md).
"""
from __future__ import annotations

import types

import torch
import torch.nn.functional as F


def _grad_buffer(weight: torch.Tensor) -> torch.Tensor:
    if weight.grad is None:
        weight.grad = torch.zeros_like(weight)
    return weight.grad


class _Lookup(torch.autograd.Function):
    """``weight[ids]``; backward: ``weight.grad.index_add_(rows of ids, H)``, no gradient returned."""

    @staticmethod
    def forward(ctx, ids, weight, padding_idx):
        ctx.save_for_backward(ids)
        ctx.param, ctx.padding_idx = weight, padding_idx  # the parameter itself, whose .grad is added to
        return F.embedding(ids, weight, padding_idx)

    @staticmethod
    def backward(ctx, grad_out):
        (ids,) = ctx.saved_tensors
        rows, h = ids.reshape(-1), grad_out.reshape(-1, grad_out.shape[-1])
        if ctx.padding_idx is not None:
            keep = rows != ctx.padding_idx
            rows, h = rows[keep], h[keep]
        buf = _grad_buffer(ctx.param)
        buf.index_add_(0, rows, h.to(buf.dtype))
        return None, None, None


class _Output(torch.autograd.Function):
    """``y = x Wᵀ + b``; backward: ``weight.grad += Hᵀ X`` in one addmm_, returns the grads of x and b."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        # the parameter object itself: a saved tensor may come back as another object (saved-tensor hooks)
        ctx.param, ctx.has_bias = weight, bias is not None
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        h = grad_out.reshape(-1, grad_out.shape[-1])
        buf = _grad_buffer(ctx.param)
        buf.addmm_(h.T.to(buf.dtype), x.reshape(-1, x.shape[-1]).to(buf.dtype))
        grad_x = grad_out @ weight.to(grad_out.dtype) if ctx.needs_input_grad[0] else None
        grad_b = h.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, None, grad_b


def _lookup_forward(self: torch.nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
    if not torch.is_grad_enabled():  # generation, log-prob recompute, the KL prediction's forward-mode pass
        return torch.nn.Embedding.forward(self, ids)
    return _Lookup.apply(ids, self.weight, self.padding_idx)


def _output_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    if not torch.is_grad_enabled():
        return torch.nn.Linear.forward(self, x)
    return _Output.apply(x, self.weight, self.bias)


def vocabulary_modules(model: torch.nn.Module, exclude: set[int]) -> list[tuple[str, torch.nn.Module]]:
    """``(name, module)`` of the model's input embedding and output layer whose weights train and are not
    in ``exclude`` (ids of sketched weights); tied weights give both modules."""
    names = {id(m): n for n, m in model.named_modules()}
    found = []
    for getter in ("get_input_embeddings", "get_output_embeddings"):
        try:
            module = getattr(model, getter)()
        except (AttributeError, NotImplementedError):
            continue
        if module is None or not isinstance(module, (torch.nn.Embedding, torch.nn.Linear)):
            continue
        if not module.weight.requires_grad or id(module.weight) in exclude:
            continue
        found.append((names.get(id(module), getter), module))
    return found


PLAIN_FORWARDS = (torch.nn.Embedding.forward, torch.nn.Linear.forward)


def install_rows(model: torch.nn.Module, exclude: set[int]) -> list[torch.Tensor]:
    """Hook the vocabulary modules (in-place gradient accumulation); returns their distinct weights (all of
    them go to RowAdam). A subclass with its own ``forward`` (Gemma's embedding scales the lookup by
    sqrt(hidden)) keeps it and autograd's gradient. An ``nn.Embedding`` whose gradient is not a plain
    scatter raises."""
    weights: list[torch.Tensor] = []
    for name, module in vocabulary_modules(model, exclude):
        if not any(w is module.weight for w in weights):
            weights.append(module.weight)
        if type(module).forward not in PLAIN_FORWARDS:
            continue
        if isinstance(module, torch.nn.Embedding):
            if module.max_norm is not None or module.scale_grad_by_freq or module.sparse:
                raise ValueError(f"LoGRA(embeddings='rows'): {name} uses max_norm, scale_grad_by_freq or "
                                 "sparse gradients, which the in-place lookup gradient does not reproduce; "
                                 "use embeddings='adamw'")
            module.forward = types.MethodType(_lookup_forward, module)
        else:
            module.forward = types.MethodType(_output_forward, module)
        module._row_hooked = True
    return weights


def remove_rows(model: torch.nn.Module) -> None:
    """Undo :func:`install_rows`: the modules' own ``forward`` comes back."""
    for module in model.modules():
        if "_row_hooked" in module.__dict__:
            module.__dict__.pop("forward", None)
            module.__dict__.pop("_row_hooked", None)
