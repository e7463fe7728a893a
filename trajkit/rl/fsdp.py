"""FSDP2 for the policy: the process group of a ``torchrun`` launch, sharding, the row split, gathering.

``policy.fsdp=true`` shards the policy (and the frozen reference) with FSDP2
(``torch.distributed.fsdp.fully_shard``, Zhao et al. 2023; the per-parameter DTensor sharding of PyTorch's
"FSDP2"): one FSDP unit per decoder layer (``model.model.layers[i]``) and the root for what is left (the
embedding, the final norm, the output layer), every parameter split along its first dimension over the
ranks. Each rank holds 1/N of the float32 master weights, of the gradients and of the optimiser state;
a unit's full weights exist only while its forward or backward runs. ``policy.dtype`` other than float32
gathers the weights in that dtype (FSDP2's ``MixedPrecisionPolicy``; gradients reduced in float32) on top
of the autocast every forward already runs under (:mod:`trajkit.rl.precision`).

Initialisation: only rank 0 builds the model whole; the other ranks build it on the meta device, shard it,
and receive their rows of rank 0's weights (:func:`load_from_rank0`), so no rank but 0 ever holds the whole.

Gradients are *summed* over the ranks (``set_gradient_divide_factor(1.0)`` with sum reduction), not
averaged as FSDP does by default: every rank's loss is already normalised by the whole optimiser slice's
counts (:class:`trajkit.rl.losses.LossNorm`), so the sum is the unsharded gradient.

The rows of each optimiser slice are split into N contiguous blocks (:meth:`Shard.rows`); every rank must
run the same number of forwards (each one all-gathers), so the world size must divide every slice:
``rollout.prompts_per_step x rollout.group_size`` must be a multiple of ``optim.minibatches x N``
(:func:`check_world`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch

from trajkit.errors import ConfigError

WORLD_ENV = "WORLD_SIZE"
SHARDS = "sharded"  # a sharded checkpoint's DCP folder (trajkit.rl.sharded_checkpoint)


def check_config(cfg) -> None:
    """Refuse what ``policy.fsdp=true`` does not support (:class:`ConfigError` naming the key)."""
    o = cfg.optim
    if o.name == "logra" and o.options.kl_budget:
        raise ConfigError("optim.logra.kl_budget with policy.fsdp=true: the KL prediction's forward-mode pass does "
                          "not run on sharded weights; set optim.logra.kl_budget=0 (LoGRA itself shards), or "
                          "policy.fsdp=false")
    if o.logits_chunk:
        raise ConfigError("optim.logits_chunk with policy.fsdp=true: the chunked output layer bypasses the "
                          "sharded root's forward; set optim.logits_chunk=0")
    if cfg.policy.dtype == "float16":
        raise ConfigError("policy.dtype=float16 with policy.fsdp=true: loss scaling of sharded gradients is "
                          "not supported; use policy.dtype=bfloat16 or float32")
    if cfg.draft.distill:
        raise ConfigError("draft.distill with policy.fsdp=true: the draft would need the whole batch's policy "
                          "distributions on one rank; set draft.distill=false (a fixed draft still drafts)")
    c = cfg.cluster
    if c.ray and c.policy_workers < 2:
        raise ConfigError("policy.fsdp=true with cluster.ray=true shards over cluster.policy_workers Ray actors: "
                          "set cluster.policy_workers=N (N >= 2), or cluster.ray=false to shard under torchrun")
    if c.weight_transfer != "object_store" and not c.ray:
        raise ConfigError(f"cluster.weight_transfer={c.weight_transfer} with policy.fsdp=true under torchrun: rank 0 "
                          "loads the gathered weights into its own engine; set cluster.weight_transfer=object_store "
                          "(or shard on Ray: cluster.ray=true cluster.policy_workers=N)")
    if cfg.rollout.backend != "trajkit" and not c.ray:
        raise ConfigError(f"rollout.backend={cfg.rollout.backend} with policy.fsdp=true under torchrun: rank 0 "
                          "generates in process with trajkit's engine; set rollout.backend=trajkit (or shard on "
                          "Ray, where the rollout workers run any backend)")


def world_size() -> int:
    """The launch's world size (``$WORLD_SIZE``, set by torchrun; 1 without it)."""
    return int(os.environ.get(WORLD_ENV, "1"))


def check_world(cfg, world: int) -> None:
    """The world size fits the run: at least 2 ranks, and a divisor of every optimiser slice's rows."""
    if world < 2:
        raise ConfigError(f"policy.fsdp=true shards over the ranks of a torchrun launch, but {WORLD_ENV}="
                          f"{os.environ.get(WORLD_ENV, 'unset')}; run `torchrun --nproc_per_node N -m trajkit.cli.main "
                          "train ...` with N >= 2, or set policy.fsdp=false")
    rows = cfg.rollout.prompts_per_step * cfg.rollout.group_size
    if rows % (cfg.optim.minibatches * world):
        raise ConfigError(f"rollout.prompts_per_step x rollout.group_size = {rows} rows per step do not split "
                          f"evenly into optim.minibatches={cfg.optim.minibatches} slices over {world} ranks; "
                          f"make the rows a multiple of {cfg.optim.minibatches * world}")


@dataclass
class Shard:
    """This rank's place in the process group: ``rank`` of ``world``."""

    rank: int
    world: int

    def rows(self, rows: torch.Tensor) -> torch.Tensor:
        """This rank's contiguous block of ``rows`` (an optimiser slice's row indices)."""
        return rows.tensor_split(self.world)[self.rank]

    def sum(self, stats: dict) -> dict:
        """``stats`` (floats) summed over the ranks, in float64; every rank gets the sums."""
        import torch.distributed as dist

        keys = sorted(stats)
        values = torch.tensor([float(stats[k]) for k in keys], dtype=torch.float64)
        dist.all_reduce(values)
        return dict(zip(keys, values.tolist()))

    def combine(self, part: torch.Tensor) -> torch.Tensor:
        """Row-disjoint tensors (zeros outside each rank's rows) -> the whole, on every rank (exact)."""
        import torch.distributed as dist

        whole = part.clone()
        dist.all_reduce(whole)
        return whole


def init_group(cfg, rank: int | None = None, world: int | None = None,
               init_method: str | None = None) -> tuple[Shard, bool]:
    """Join the torchrun launch's process group (its environment), or with ``rank``, ``world`` and
    ``init_method`` (``tcp://HOST:PORT``: a Ray gang's rank 0) a given one; gloo on the CPU, NCCL on CUDA;
    collectives time out after ``cluster.timeout_s``; unless the caller already did. A CUDA rank uses
    device ``LOCAL_RANK`` (torchrun) or the one Ray gave it. -> (this rank's place, whether this call made
    the group: then it is this run's to close)."""
    import torch.distributed as dist

    given = {} if rank is None else {"rank": rank, "world_size": world, "init_method": init_method}
    check_world(cfg, dist.get_world_size() if dist.is_initialized() else world or world_size())
    from trajkit.rl.precision import resolve_device

    device = resolve_device(cfg.policy.device)
    backend = "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        backend = "cpu:gloo,cuda:nccl"
    made = not dist.is_initialized()
    if made:
        dist.init_process_group(backend, timeout=timedelta(seconds=cfg.cluster.timeout_s), **given)
    return Shard(dist.get_rank(), dist.get_world_size()), made


def close_group() -> None:
    """Leave the process group once every rank is done (a barrier first: destroying it while a peer still
    works aborts that peer)."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def decoder_layers(model) -> torch.nn.ModuleList:
    layers = getattr(getattr(model, "model", None), "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        raise ConfigError(f"policy.fsdp: {type(model).__name__} has no model.layers (the decoder layers FSDP "
                          "shards one by one); set policy.fsdp=false")
    return layers


def shard_model(model, dtype: torch.dtype):
    """``model`` sharded in place per decoder layer + root (see the module docstring); -> ``model``."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    kwargs = {}
    if dtype != torch.float32:
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    for layer in decoder_layers(model):
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    for module in model.modules():
        if hasattr(module, "set_gradient_divide_factor"):
            module.set_gradient_divide_factor(1.0)  # sum, not mean (gloo has no pre-multiplied sum)
            module.set_force_sum_reduction_for_comms(True)
    return model


def load_from_rank0(model, whole: dict | None, device: torch.device) -> None:
    """Give the sharded ``model`` (:func:`shard_model`) rank 0's weights, on every rank together. Rank 0 passes
    its whole state dict (taken before sharding: it built the model whole), every other rank ``None`` and a
    model built on the meta device (:func:`trajkit.rl.build.policy_skeleton`), which first gets empty storage
    for its shards only (``to_empty`` after ``fully_shard``: a weight tied to another stays one parameter).
    The parameters are broadcast one tensor at a time, each rank keeping its own rows (torch's
    ``set_model_state_dict(full_state_dict=True, broadcast_from_rank0=True)``), so a rank > 0 never holds
    more than its shards and one whole tensor. The buffers are broadcast whole: a non-persistent one (the
    rotary ``inv_freq``) is in no state dict, and a meta buffer has no values to recompute from."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    if whole is None:
        model.to_empty(device=device)
    set_model_state_dict(model, whole if whole is not None else {},
                         options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    for _, buffer in sorted(model.named_buffers()):
        dist.broadcast(buffer, src=0)


def local_bytes(model) -> int:
    """The bytes of parameters this rank holds (a DTensor counts its local shard; a meta tensor none)."""
    def local(t):
        t = t.to_local() if hasattr(t, "to_local") else t
        return 0 if t.is_meta else t.numel() * t.element_size()
    return sum(local(p) for p in model.parameters())


def full_state(model) -> dict:
    """The whole state dict on rank 0, on the CPU, gathered one parameter at a time (``{}`` elsewhere);
    every rank must call it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def save_shards(model, optimizer, folder: str) -> None:
    """DCP-save ``model``'s (and ``optimizer``'s, unless None) state into ``folder/sharded`` (every rank)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    blob = {"model": get_model_state_dict(model)}
    if optimizer is not None:
        blob.update(_optimizer_blob(model, optimizer))
    dcp.save(blob, checkpoint_id=str(Path(folder) / SHARDS))


def load_shards(model, optimizer, folder) -> None:
    """DCP-load ``folder/sharded`` into ``model`` and ``optimizer`` (sharded over any number of ranks, or
    whole in one process); a checkpoint saved without optimiser state leaves the optimiser as it is."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    path = str(Path(folder) / SHARDS)
    saved = dcp.FileSystemReader(path).read_metadata().state_dict_metadata
    blob = {"model": get_model_state_dict(model)}
    has_optim = any(key.startswith(("optim.", "logra.")) for key in saved)
    if has_optim:
        blob.update(_optimizer_blob(model, optimizer))
        if ("logra" in blob) != any(key.startswith("logra.") for key in saved):
            raise ConfigError(f"checkpoint.resume_from: {folder} holds the state of another optim.name than "
                              "this run's; resume with the optimiser that wrote it, or set log.save_optimizer="
                              "false when saving")
    dcp.load(blob, checkpoint_id=path)
    set_model_state_dict(model, blob["model"])
    if has_optim:
        _load_optimizer(model, optimizer, blob)


def _optimizer_blob(model, optimizer) -> dict:
    """``{"optim": ...}`` (DCP's optimiser state, keyed by parameter name), plus ``"logra"`` for LoGRA (its row
    state, :meth:`trajkit.optim.logra.LoGRA.sharded_state_dict`; ``"optim"`` is then its nested AdamW's)."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    from trajkit.optim import LoGRA

    if not isinstance(optimizer, LoGRA):
        return {"optim": get_optimizer_state_dict(model, optimizer)}
    out = {"logra": optimizer.sharded_state_dict()}
    if optimizer.native is not None:
        out["optim"] = get_optimizer_state_dict(model, optimizer.native)
    return out


def _load_optimizer(model, optimizer, blob: dict) -> None:
    from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

    if "logra" not in blob:
        set_optimizer_state_dict(model, optimizer, blob["optim"])
        return
    optimizer.load_sharded_state_dict(blob["logra"])
    if optimizer.native is not None:
        set_optimizer_state_dict(model, optimizer.native, blob["optim"])
        optimizer.param_groups[1:] = optimizer.native.param_groups  # load_state_dict made new group dicts
        optimizer.state = optimizer.native.state
