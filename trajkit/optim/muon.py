"""Muon on the hidden weight matrices, AdamW on everything else, as one optimiser object.

Muon (K. Jordan et al., "Muon: An optimizer for hidden layers in neural networks", 2024; J. Liu et al.,
"Muon is Scalable for LLM Training", arXiv 2502.16982): SGD with (Nesterov) momentum whose update matrix
is orthogonalised by a few Newton-Schulz iterations before it is applied, so every direction of a weight
matrix moves by about the same amount. It is defined for 2-D hidden weights only; the input embedding,
the output layer and the 1-D parameters (norms, biases) take AdamW, as both papers prescribe.

The step itself is PyTorch's, unchanged: ``torch.optim.Muon`` on the hidden matrices and
``torch.optim.AdamW`` on the rest, both live inside :class:`MuonAdamW`. Its ``param_groups`` *are* the two
inner optimisers' group dicts (Muon's first) and its ``state`` is shared with both, so ``state_dict`` /
``load_state_dict``, LR schedulers, ``zero_grad``, gradient clipping and ``GradScaler`` see one ordinary
optimiser. :func:`split_parameters` decides who gets what:

- Muon: every trainable 2-D parameter that is not a vocabulary matrix (attention and MLP projections);
- AdamW: the weights of every ``nn.Embedding`` and of ``model.get_output_embeddings()`` (tied or not),
  and every parameter that is not 2-D.

Deviations: none in the arithmetic. Two choices of trajkit's: ``adjust_lr`` defaults to Moonshot's
``match_rms_adamw`` (torch's default is Keller Jordan's ``original``), because it makes one learning rate
(``optim.lr``) and one weight decay reasonable for both halves, which is what an RL config that was tuned
for AdamW needs; and Muon's learning rate defaults to AdamW's for the same reason. Torch's
orthogonalisation runs in bfloat16 whatever the parameter's dtype (its ``_zeropower_via_newtonschulz``).

    opt = MuonAdamW(model, lr=1e-5, momentum=0.95)
    for batch in batches:
        opt.zero_grad()
        loss_fn(model(batch)).backward()
        opt.step()
"""
from __future__ import annotations

import torch

ADJUST_LR = ("original", "match_rms_adamw")  # torch.optim.Muon's adjust_lr_fn values


def vocabulary_weights(model: torch.nn.Module) -> list[torch.Tensor]:
    """The weights of ``model``'s embeddings (every ``nn.Embedding``) and output layer, deduplicated."""
    found: dict[int, torch.Tensor] = {}
    for module in model.modules():
        if isinstance(module, torch.nn.Embedding):
            found[id(module.weight)] = module.weight
    get_out = getattr(model, "get_output_embeddings", None)
    out = get_out() if get_out is not None else None
    if out is not None and getattr(out, "weight", None) is not None:
        found[id(out.weight)] = out.weight
    return list(found.values())


def split_parameters(model: torch.nn.Module) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """``model``'s trainable parameters -> (Muon's: 2-D hidden matrices, AdamW's: the rest), each in
    ``named_parameters`` order."""
    vocab = {id(w) for w in vocabulary_weights(model)}
    hidden, rest = [], []
    for p in model.parameters():
        if not p.requires_grad:
            continue
        (hidden if p.ndim == 2 and id(p) not in vocab else rest).append(p)
    return hidden, rest


def _muon_class(params: list[torch.Tensor]) -> type:
    """``torch.optim.Muon``, or for FSDP2-sharded matrices (DTensors) its per-matrix gathering step
    (:class:`trajkit.optim.muon_sharded.GatheredMuon`)."""
    if any(type(p).__name__ == "DTensor" for p in params):
        from trajkit.optim.muon_sharded import GatheredMuon

        return GatheredMuon
    return torch.optim.Muon


class MuonAdamW(torch.optim.Optimizer):
    """``torch.optim.Muon`` on ``model``'s hidden matrices and ``torch.optim.AdamW`` on its other parameters.

    ``param_groups[0]`` is Muon's group (``lr`` = ``muon_lr``, default ``lr``; ``momentum``, ``nesterov``,
    ``weight_decay`` = ``muon_weight_decay``, default ``weight_decay``; ``adjust_lr_fn``, ``ns_steps``),
    ``param_groups[1]`` AdamW's (``lr``, ``betas``, ``eps``, ``weight_decay``); either is absent when it
    would be empty. ``muon`` and ``adamw`` are the inner optimisers (None when empty).
    """

    def __init__(self, model: torch.nn.Module, lr: float = 1e-3, weight_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, muon_lr: float | None = None,
                 muon_weight_decay: float | None = None, momentum: float = 0.95, nesterov: bool = True,
                 adjust_lr: str = "match_rms_adamw", ns_steps: int = 5):
        if adjust_lr not in ADJUST_LR:
            raise ValueError(f"adjust_lr must be one of {list(ADJUST_LR)}, got {adjust_lr!r}")
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        hidden, rest = split_parameters(model)
        if not hidden and not rest:
            raise ValueError("MuonAdamW: the model has no trainable parameters")
        self.muon = _muon_class(hidden)(hidden, lr=lr if muon_lr is None else muon_lr, momentum=momentum,
                                     nesterov=nesterov, adjust_lr_fn=adjust_lr, ns_steps=ns_steps,
                                     weight_decay=weight_decay if muon_weight_decay is None else muon_weight_decay
                                     ) if hidden else None
        self.adamw = torch.optim.AdamW(rest, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay) if rest else None
        groups = [g for opt in self.inner() for g in opt.param_groups]
        super().__init__(groups, {})  # adds the inner optimisers' group dicts themselves, not copies
        self._bind()

    def inner(self) -> list[torch.optim.Optimizer]:
        """The inner optimisers, Muon's first."""
        return [opt for opt in (self.muon, self.adamw) if opt is not None]

    def _bind(self) -> None:
        """Point the inner optimisers at this optimiser's group dicts and state (again after a load)."""
        start = 0
        for opt in self.inner():
            n = len(opt.param_groups)
            opt.param_groups = self.param_groups[start:start + n]
            opt.state = self.state
            start += n

    @torch.no_grad()
    def step(self, closure=None):
        """One step of each inner optimiser (each skips the parameters without a gradient)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for opt in self.inner():
            opt.step()
        return loss

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)  # builds new group dicts and a new state: share them again
        self._bind()
