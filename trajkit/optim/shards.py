"""LoGRA on FSDP2-sharded weights: every rank's sketch summed and cut to the rows the rank holds.

Under ``policy.fsdp=true`` (:mod:`trajkit.rl.fsdp`) a weight ``W: [out, in]`` is a DTensor split by rows: a
rank holds ``W_r: [out_r, in]``. Its forward and backward see the whole (all-gathered) weight, so a rank's
sketch hook accumulates ``S^(r) = G^(r) Aᵀ: [out, rank]`` over its own rows of the batch (``G^(r)`` the
gradient of its rows). Sketching is linear, so the whole batch's sketch is ``S = Σ_r S^(r)``, and RowAdam's
state and direction are per output row (:mod:`trajkit.optim.row_adam`): rank ``r`` needs only ``S``'s rows
``out_r``. :func:`rows_of` reduce-scatters the sketches to exactly the weight's row split (DTensor
``Partial -> Shard(0)``, FSDP2's own chunking), so a rank keeps ``v_r: [out_r, 1]`` and updates
``W_r -= lr D_r A`` in place: the dense ``[out, in]`` update is never formed, on any rank. The vocabulary
matrices (``embeddings="rows"``) get FSDP2's reduce-scattered exact gradient, already a row block.

Communication per step and target: one reduce-scatter of ``[out, rank]`` floats (instead of the
``[out, in]`` of a dense gradient). Plain tensors pass through every function unchanged (one process).
"""
from __future__ import annotations

import torch


def is_sharded(t: torch.Tensor) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(t, DTensor)


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's block of ``t`` (a DTensor), the same storage: in-place changes reach ``t``; or ``t``."""
    return t.to_local() if is_sharded(t) else t


def rows_of(partial: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``partial: [out, k]`` (this rank's summand) summed over the ranks and cut to ``like``'s row split
    -> ``[out_r, k]`` (a reduce-scatter); ``partial`` itself when ``like`` is not sharded."""
    if not is_sharded(like):
        return partial
    from torch.distributed.tensor import DTensor, Partial

    mesh = like.device_mesh
    whole = DTensor.from_local(partial, mesh, [Partial()] * mesh.ndim, run_check=False)
    return whole.redistribute(mesh, like.placements).to_local()


def as_rows(block: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``block: [out_r, k]`` (per-row state of ``like``'s rows on this rank) as a DTensor of ``like``'s split
    (a checkpoint can then reshard it); ``block`` when ``like`` is not sharded."""
    if not is_sharded(like):
        return block
    from torch.distributed.tensor import DTensor

    shape = (like.shape[0], *block.shape[1:])
    stride = torch.empty(shape, device="meta").stride()
    return DTensor.from_local(block, like.device_mesh, like.placements, run_check=False, shape=shape, stride=stride)
