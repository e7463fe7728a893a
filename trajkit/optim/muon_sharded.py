"""Muon on FSDP2-sharded matrices: the orthogonalisation gathers each matrix whole, one at a time.

``torch.optim.Muon`` orthogonalises a weight's whole update matrix (Newton-Schulz iterations of ``X X^T``),
which a rank of a sharded policy (:mod:`trajkit.rl.fsdp`) holds only a row block of. :class:`GatheredMuon`
is torch's Muon step with that one operation on the whole matrix: the momentum buffer stays sharded and is
updated on the shard (it is elementwise), the (Nesterov) update is all-gathered (``DTensor.full_tensor``),
orthogonalised by torch's own ``_zeropower_via_newtonschulz`` on every rank, and each rank keeps its row
block of the result. So the step equals the unsharded one bit for bit where the gradients do, at the cost
of one whole matrix (plus Newton-Schulz's bfloat16 temporaries) at a time on every rank and the
orthogonalisation computed N times. Parameters that are not DTensors take torch's step unchanged.
"""
from __future__ import annotations

import torch
from torch.optim._muon import _adjust_lr, _zeropower_via_newtonschulz


class GatheredMuon(torch.optim.Muon):
    """``torch.optim.Muon`` whose orthogonalisation sees each sharded matrix whole (module docstring)."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._step_one(p, group)
        return loss

    def _step_one(self, p: torch.Tensor, group: dict) -> None:
        from torch.distributed.tensor import DTensor, Replicate

        grad, momentum = p.grad, group["momentum"]
        if grad.ndim != 2:
            raise ValueError("Param gradient must be a 2D matrix")
        state = self.state[p]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(grad, memory_format=torch.preserve_format)
        buf = state["momentum_buffer"]
        buf.lerp_(grad, 1 - momentum)
        update = grad.lerp(buf, momentum) if group["nesterov"] else buf
        sharded = isinstance(update, DTensor)
        whole = update.full_tensor() if sharded else update
        ortho = _zeropower_via_newtonschulz(whole, group["ns_coefficients"], group["ns_steps"], group["eps"])
        if sharded:  # the replicated result cut back to this rank's block (a local slice, no communication)
            ortho = DTensor.from_local(ortho, update.device_mesh, [Replicate()] * update.device_mesh.ndim,
                                       run_check=False).redistribute(update.device_mesh, update.placements)
        lr = group["lr"]
        p.mul_(1 - lr * group["weight_decay"])
        p.add_(ortho, alpha=-_adjust_lr(lr, group["adjust_lr_fn"], p.shape))
