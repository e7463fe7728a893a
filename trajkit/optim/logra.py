"""LoGRA: full-weight updates from low-rank gradient sketches, with RowAdam and a KL-budgeted step.

Zhang et al., "Scaling LLM Reinforcement Learning with Low-Rank Gradient Sketches" (arXiv 2610.06647);
the mechanism as NeMo Automodel's ``gradient_sketch`` documents it, written anew here:

- the chosen linear weights (attention and MLP projections) never get a dense gradient: the backward
  accumulates ``S = Hᵀ (X Aᵀ): [out, rank]`` (:mod:`trajkit.optim.sketch`), A redrawn every step;
- RowAdam turns S into ``D`` (one second moment per output row, :mod:`trajkit.optim.row_adam`) and the
  update ``Delta W = -lr D A`` is merged into the full weight (float32 master for bf16/fp16 weights);
- the input embedding and output layer (``embeddings="rows"``, the default) keep their exact gradient,
  accumulated in place, and step with RowAdam's per-row second moment (:mod:`trajkit.optim.embeddings`);
  ``embeddings="adamw"`` leaves them to the nested AdamW instead;
- every other trainable parameter (norms, biases) goes to a nested ``torch.optim.AdamW``;
- with ``kl_budget`` set, the step predicts the mean per-token KL between the policy before and after
  (:mod:`trajkit.optim.kl`) and shrinks the whole step so the prediction stays within the budget.

Plain PyTorch (SFT the same way; ``kl_forward`` only when ``kl_budget`` is set)::

    opt = LoGRA(model, lr=1e-4, rank=256)
    for batch in batches:
        opt.zero_grad()
        for mb in micro_batches(batch):          # sketches add up across micro-batches
            loss_fn(model(mb)).backward()
        opt.step()

    opt = LoGRA(model, lr=1e-4, kl_budget=1e-3)   # KL-budgeted: say on which tokens KL is measured
    opt.step(kl_forward=lambda: ((model(ids).logits / temperature, mask) for ids, mask in parts))

Where it deviates from the paper's description: see docs/optim.md.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
import torch.autograd.forward_ad as fwAD
from torch.nn.attention import SDPBackend, sdpa_kernel

from trajkit.optim.embeddings import install_rows, remove_rows
from trajkit.optim.kl import dual_parameters, tangent_kl
from trajkit.optim.row_adam import UPDATES
from trajkit.optim.shards import as_rows, local, rows_of
from trajkit.optim.sketch import (
    DEFAULT_TARGETS,
    SketchSettings,
    SketchState,
    install_sketches,
)

KLForward = Callable[[], Iterable[tuple[torch.Tensor, torch.Tensor]]]


class LoGRA(torch.optim.Optimizer):
    """RowAdam (or SGD) on the sketches of ``model``'s targets and on the dense gradient of its vocabulary
    matrices (``embeddings="rows"``), nested AdamW on its other parameters. ``model`` may be FSDP2-sharded
    (its weights DTensors split by rows): each rank then keeps and steps its rows only
    (:mod:`trajkit.optim.shards`); ``kl_budget`` needs an unsharded model.

    ``param_groups[0]`` holds the sketch targets, then the vocabulary weights (``rows``), and their settings
    (``lr``, ``beta2``, ``eps``, ``weight_decay``, ``update``, ``step``); the other groups are the nested
    AdamW's own group dicts, so LR schedulers reach both. Row moments (``[out, 1]`` per weight) and float32
    masters live in ``sketch_state`` / ``row_state`` and travel in ``state_dict()["sketch"]``. ``last`` holds
    the last step's KL prediction (``predicted_kl`` at the full step, ``scale`` applied). ``native_lr``
    (default ``lr``) is the nested AdamW's rate; with ``embeddings="rows"`` the vocabulary weights follow
    ``lr``.
    """

    def __init__(self, model: torch.nn.Module, lr: float = 1e-3, rank: int = 256,
                 distribution: str = "rademacher", seed: int = 0, beta2: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, kl_budget: float | None = None, targets: str = DEFAULT_TARGETS,
                 update: str = "row_adam", embeddings: str = "rows", native_betas: tuple[float, float] = (0.9, 0.99),
                 native_lr: float | None = None):
        _check(lr, beta2, eps, weight_decay, kl_budget, update, embeddings)
        self.model = model
        self.sketches = install_sketches(model, SketchSettings(rank, distribution, seed, targets))
        targets_ = [s.weight for s in self.sketches.states]
        ids = {id(w) for w in targets_}
        self.rows = install_rows(model, ids) if embeddings == "rows" else []
        ids |= {id(w) for w in self.rows}
        defaults = {"lr": lr, "beta2": beta2, "eps": eps, "weight_decay": weight_decay, "update": update, "step": 0}
        super().__init__([{"params": targets_ + self.rows}], defaults)
        native = [p for p in model.parameters() if p.requires_grad and id(p) not in ids]
        self.native = None
        if native:
            self.native = torch.optim.AdamW(native, lr=lr if native_lr is None else native_lr,
                                            betas=native_betas, weight_decay=weight_decay)
            self.native.state = self.state
            self.param_groups.extend(self.native.param_groups)
        self.kl_budget = kl_budget
        self.sketch_state: list[dict[str, torch.Tensor]] = [{} for _ in self.sketches.states]
        self.row_state: list[dict[str, torch.Tensor]] = [{} for _ in self.rows]
        self.last: dict[str, float] = {}

    # ---- gradients ----
    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none)
        self.sketches.zero_()

    # ---- the step ----
    @torch.no_grad()
    def step(self, closure=None, kl_forward: KLForward | None = None):
        """One update. ``kl_forward`` (needed when ``kl_budget`` is set) yields ``(logits [B,T,V], mask
        [B,T])`` pairs over the tokens the budget is measured on, calling the model itself."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self.kl_budget is not None and kl_forward is None:
            raise ValueError("LoGRA(kl_budget=...) needs step(kl_forward=...): a callable yielding "
                             "(logits, mask) over the tokens the KL budget is measured on")
        group = self.param_groups[0]
        t = group["step"] + 1
        directions = self._directions(group, t)
        row_directions = self._row_directions(group, t)
        native_delta = self._native_step(record=self.kl_budget is not None)
        scale, predicted = 1.0, float("nan")
        if self.kl_budget is not None:
            tangents = {**native_delta, **self._row_deltas(row_directions, group)}
            predicted = self.predict_kl(kl_forward, directions, tangents, group)
            if predicted > self.kl_budget:
                scale = math.sqrt(self.kl_budget / predicted)
        self._apply(directions, row_directions, group, scale)
        for p, delta in native_delta.items():
            p.add_(delta, alpha=scale)
        group["step"] = t
        self.sketches.step = t
        self.sketches.zero_()
        for w in self.rows:  # the buffer now holds D, not a gradient; the next backward starts a fresh one
            w.grad = None
        self.last = {"predicted_kl": predicted, "scale": scale}
        return loss

    @staticmethod
    def _direction(buffer: torch.Tensor, extra: dict[str, torch.Tensor], group: dict, t: int) -> torch.Tensor:
        """RowAdam's (or SGD's) ``D`` of ``buffer: [rows, cols]``, in place; its row moment lives in ``extra``."""
        if "row_v" not in extra:
            extra["row_v"] = torch.zeros(buffer.shape[0], 1, device=buffer.device)
        return UPDATES[group["update"]](buffer, extra["row_v"], t, group["beta2"], group["eps"], inplace=True)

    def _directions(self, group: dict, t: int) -> dict[SketchState, torch.Tensor]:
        """``D: [out, rank]`` per target with a sketch (computed in place over the sketch buffer)."""
        return {state: self._direction(rows_of(state.sketch, state.weight), extra, group, t)
                for state, extra in zip(self.sketches.states, self.sketch_state) if state.sketch is not None}

    def _row_directions(self, group: dict, t: int) -> dict[torch.Tensor, torch.Tensor]:
        """``D: [V, hidden]`` per vocabulary weight with a gradient (computed in place over its ``.grad``)."""
        return {w: self._direction(local(w.grad).float(), extra, group, t)
                for w, extra in zip(self.rows, self.row_state) if w.grad is not None}

    def _row_deltas(self, directions: dict[torch.Tensor, torch.Tensor],
                    group: dict) -> dict[torch.Tensor, torch.Tensor]:
        """The full step's change of each vocabulary weight (the KL prediction's tangents)."""
        lr, wd = group["lr"], group["weight_decay"]
        return {w: d.mul(-lr).add_(w.float(), alpha=-lr * wd).to(w.dtype) for w, d in directions.items()}

    def _apply(self, directions: dict[SketchState, torch.Tensor], row_directions: dict[torch.Tensor, torch.Tensor],
               group: dict, scale: float) -> None:
        """``W <- W (1 - lr wd) - lr D A`` for every target and ``W <- W (1 - lr wd) - lr D`` for every
        vocabulary weight, on a float32 master when the weight is low precision."""
        lr, wd = group["lr"] * scale, group["weight_decay"]
        steps = [(s.weight, extra, directions[s], s) for s, extra in zip(self.sketches.states, self.sketch_state)
                 if s in directions]
        steps += [(w, extra, row_directions[w], None) for w, extra in zip(self.rows, self.row_state)
                  if w in row_directions]
        for w, extra, d, state in steps:
            weight = local(w.data)  # a sharded weight's row block [out_r, in], like d's rows
            if w.dtype in (torch.float16, torch.bfloat16) and "master" not in extra:
                extra["master"] = weight.float()
            target = extra.get("master", weight)
            if wd:
                target.mul_(1 - lr * wd)
            if state is None:
                target.add_(d, alpha=-lr)
            else:
                target.addmm_(d, state.projection().float(), alpha=-lr)
            if target is not weight:
                weight.copy_(target)

    def _native_step(self, record: bool) -> dict[torch.Tensor, torch.Tensor]:
        """The nested AdamW step. With ``record``: the parameters are left where they were and their
        full-step change is returned (AdamW's update is linear in lr, so ``scale * delta`` is the step at
        ``scale * lr``; its moments are updated as usual)."""
        if self.native is None:
            return {}
        if not record:
            self.native.step()
            return {}
        params = [p for g in self.native.param_groups for p in g["params"] if p.grad is not None]
        before = [p.detach().clone() for p in params]
        self.native.step()
        out = {}
        for p, old in zip(params, before):
            delta = p.detach() - old
            p.copy_(old)
            out[p] = delta
        return out

    # ---- KL prediction ----
    def predict_kl(self, kl_forward: KLForward, directions: dict[SketchState, torch.Tensor],
                   native_delta: dict[torch.Tensor, torch.Tensor], group: dict) -> float:
        """Mean over kl_forward's masked tokens of ½ Var_p(dz): the second-order KL of the full step."""
        lr, wd = group["lr"], group["weight_decay"]

        def tangent(state: SketchState, x: torch.Tensor) -> torch.Tensor:
            x2 = x.reshape(-1, x.shape[-1])
            d = directions.get(state)
            out = torch.zeros(x2.shape[0], state.weight.shape[0], device=x.device, dtype=x.dtype)
            if d is not None:
                out -= lr * ((x2 @ state.projection().T).float() @ d.T).to(x.dtype)
                if wd:
                    out -= lr * wd * (x2 @ state.weight.T)
            return out

        total = count = 0.0
        self.sketches.tangent = tangent
        try:
            # the fused SDPA kernels have no forward-mode derivative; the math kernel is plain ops
            with fwAD.dual_level(), dual_parameters(self.model, native_delta), sdpa_kernel(SDPBackend.MATH):
                for logits, mask in kl_forward():
                    primal, dz = fwAD.unpack_dual(logits)
                    if dz is None:
                        dz = torch.zeros_like(primal)
                    s, n = tangent_kl(primal, dz, mask)
                    total, count = total + s, count + n
        finally:
            self.sketches.tangent = None
        if count == 0:
            raise ValueError("kl_forward yielded no masked tokens to measure the KL on")
        return total / count

    # ---- checkpoints ----
    def state_dict(self) -> dict:
        out = super().state_dict()
        out["sketch"] = {"names": [s.name for s in self.sketches.states],
                         "state": [{k: v.clone() for k, v in e.items()} for e in self.sketch_state],
                         "rows": [{k: v.clone() for k, v in e.items()} for e in self.row_state]}
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        sketch = state_dict.pop("sketch")
        names = [s.name for s in self.sketches.states]
        if sketch["names"] != names:
            raise ValueError(f"LoGRA checkpoint targets {sketch['names'][:3]}... do not match this model's "
                             f"{names[:3]}... (same model and targets pattern needed)")
        rows = sketch.get("rows", [])
        if len(rows) != len(self.rows):
            raise ValueError(f"LoGRA checkpoint has {len(rows)} vocabulary weight(s) under RowAdam, this optimiser "
                             f"{len(self.rows)} (save and resume with the same embeddings= setting)")
        super().load_state_dict(state_dict)
        if self.native is not None:
            self.native.param_groups = self.param_groups[1:]
            self.native.state = self.state
        self.sketches.step = self.param_groups[0]["step"]
        weights = [s.weight for s in self.sketches.states] + self.rows
        for w, saved, extra in zip(weights, sketch["state"] + rows, self.sketch_state + self.row_state):
            extra.clear()
            extra.update({k: v.to(device=w.device, dtype=torch.float32) for k, v in saved.items()})

    def sharded_state_dict(self) -> dict:
        """The state for ``torch.distributed.checkpoint`` (which reshards it): ``group`` (the first group's
        settings and step), ``targets`` / ``rows`` (per weight: ``row_v`` and, for low-precision weights,
        ``master``, as DTensors of the weight's row split on a sharded model; a weight not stepped yet gets
        the zeros and copy its first step would make). The nested AdamW's state is not in it: DCP's
        ``get_optimizer_state_dict(model, opt.native)`` keys that by parameter name."""
        def per_weight(w: torch.Tensor, extra: dict) -> dict:
            block = local(w.detach())
            out = {"row_v": extra.get("row_v", torch.zeros(block.shape[0], 1, device=block.device))}
            if w.dtype in (torch.float16, torch.bfloat16):
                out["master"] = extra.get("master", block.float())
            return {k: as_rows(v, w) for k, v in out.items()}

        group = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        return {"group": group,
                "targets": {s.name: per_weight(s.weight, e) for s, e in zip(self.sketches.states, self.sketch_state)},
                "rows": {str(i): per_weight(w, e) for i, (w, e) in enumerate(zip(self.rows, self.row_state))}}

    def load_sharded_state_dict(self, blob: dict) -> None:
        """Restore :meth:`sharded_state_dict`'s ``blob`` (as loaded into a template of this optimiser's own)."""
        self.param_groups[0].update(blob["group"])
        self.sketches.step = self.param_groups[0]["step"]
        extras = [*zip(blob["targets"].values(), self.sketch_state), *zip(blob["rows"].values(), self.row_state)]
        for saved, extra in extras:
            extra.clear()
            extra.update({k: local(v).detach().clone() for k, v in saved.items()})

    def remove(self) -> None:
        """Take the sketch and vocabulary hooks off the model (its modules train normally again)."""
        self.sketches.remove()
        remove_rows(self.model)


def _check(lr: float, beta2: float, eps: float, weight_decay: float, kl_budget: float | None, update: str,
           embeddings: str) -> None:
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if not 0 <= beta2 < 1:
        raise ValueError(f"beta2 must be in [0, 1), got {beta2}")
    if not eps >= 0 or not weight_decay >= 0:
        raise ValueError(f"eps and weight_decay must be >= 0, got {eps}, {weight_decay}")
    if kl_budget is not None and not kl_budget > 0:
        raise ValueError(f"kl_budget must be > 0 (or None for no budget), got {kl_budget}")
    if update not in UPDATES:
        raise ValueError(f"update must be one of {sorted(UPDATES)}, got {update!r}")
    if embeddings not in ("rows", "adamw"):
        raise ValueError(f"embeddings must be 'rows' (RowAdam on their exact gradient) or 'adamw' (nested "
                         f"AdamW), got {embeddings!r}")
