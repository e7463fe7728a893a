"""Weight sync by NCCL broadcast (CUDA only): the policy worker's GPU -> every vLLM rollout engine's GPU.

Written against vLLM 0.32's weight-transfer API (``vllm.distributed.weight_transfer``; the API changed
between 0.16 and 0.22, and this module supports 0.32 only): the engines are built with
``weight_transfer_config={"backend": "nccl"}`` (:class:`trajkit.backends.vllm_worker.VllmWorker`,
``weight_transfer="nccl"``); the policy worker opens the NCCL group as rank 0 with
``NCCLTrainerWeightTransferEngine.trainer_init`` over a ``ModuleSource`` of the policy, and each sync is
one ``send_weights()``: vLLM's ``start_weight_update`` / ``update_weights`` (received inside the same NCCL
broadcast) / ``finish_weight_update`` on every engine, driven through :class:`VllmActorsClient`, then the
prefix cache reset. A trained draft goes the same way after ``start_draft_weight_update`` (vLLM's drafter
refit), over its own group.

From a sharded gang (``cluster.policy_workers=N``, ``policy.fsdp=true``): every policy actor makes the engine
with its gang rank (vLLM's ``TrainerInitInfo.rank``; rank 0 is the sender and alone opens the NCCL group,
the others ``is_sender=False``), over a :class:`ShardSource` of its shards, and every actor calls
``send_weights()`` together: the source gathers one parameter at a time (``DTensor.full_tensor()``, a
collective of the gang, in ``named_parameters`` order on every rank), and vLLM packs the sender's gathered
tensors into its broadcast buckets (``packed_buffer_size_bytes``, double-buffered). So no rank holds the
whole model: the sender holds one whole parameter plus vLLM's packed buffers; the others one whole
parameter, dropped as soon as it is gathered.

Needs a CUDA device (vLLM's CPU build has no NCCL engine that can start); tests/cluster/test_nccl.py is
marked ``gpu`` and skipped without one. The policy worker needs vLLM importable for the trainer-side
engine (``cluster.policy_python``, a venv with vLLM and trajkit).
The default ``object_store`` path (:mod:`trajkit.cluster.split`) is the one tested.
"""
from __future__ import annotations

from trajkit.errors import ConfigError


class VllmActorsClient:
    """vLLM's ``VLLMWeightSyncClient`` protocol (four methods) over trajkit's vLLM actors: every call fans
    out to all of them and waits (vLLM's ``RayVLLMWeightSyncClient`` does the same over its own actors)."""

    def __init__(self, handles: list, draft: bool = False):
        self.handles, self.draft = list(handles), draft

    def _all(self, method: str, *args):
        import ray

        return ray.get([getattr(h, method).remote(*args) for h in self.handles])

    def init_weight_transfer_engine(self, init_info: dict) -> None:
        self._all("transfer_init", init_info)

    def start_weight_update(self) -> None:
        self._all("transfer_start", self.draft)

    def update_weights(self, update_info: dict) -> None:
        self._all("transfer_update", update_info)

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self._all("transfer_finish")


def require_cuda_vllm():
    """vLLM's trainer-side NCCL engine, or a clear error where it cannot run."""
    import torch

    if not torch.cuda.is_available():
        raise ConfigError("cluster.weight_transfer=nccl needs CUDA on the policy worker; use "
                          "cluster.weight_transfer=object_store on CPU")
    try:
        from vllm.distributed.weight_transfer.base import ModuleSource
        from vllm.distributed.weight_transfer.nccl_engine import (
            NCCLTrainerInitInfo,
            NCCLTrainerWeightTransferEngine,
        )
    except ImportError:
        raise ConfigError("cluster.weight_transfer=nccl: the policy worker's python has no vLLM 0.32 (its "
                          "trainer-side NCCL engine); set cluster.policy_python to a venv with vLLM and trajkit"
                          ) from None
    return ModuleSource, NCCLTrainerInitInfo, NCCLTrainerWeightTransferEngine  # ModuleSource: checks the import


class ShardSource:
    """vLLM's ``WeightSource`` contract (``metadata()`` and a fresh iteration per sync) over a module that may
    be FSDP2-sharded: ``metadata()`` gives every parameter's name, dtype and *global* shape without any
    communication; iterating yields ``(name, whole tensor)`` in the same order, each DTensor gathered on its
    own (``full_tensor()``: every rank of the gang must iterate, in lockstep) and each plain tensor as it is.
    A tied parameter comes once, under its first name (``named_parameters``), as vLLM expects."""

    def __init__(self, module):
        self.module = module

    def metadata(self) -> list:
        from vllm.distributed.weight_transfer.base import ParamMeta

        return [ParamMeta(name, dtype, shape) for name, dtype, shape in self.layout()]

    def layout(self) -> list[tuple[str, object, tuple[int, ...]]]:
        """``(name, dtype, global shape)`` of each parameter, in send order (no communication)."""
        return [(name, p.dtype, tuple(p.shape)) for name, p in self.module.named_parameters()]

    def __iter__(self):
        for name, p in self.module.named_parameters():
            whole = p.full_tensor() if hasattr(p, "full_tensor") else p
            yield name, whole.detach()


class NcclSender:
    """A policy worker's side: one NCCL group per model (policy; draft when trained) with every engine.
    ``rank``: the worker's rank in a sharded gang (0 sends; the others only join each parameter's gather)."""

    def __init__(self, module, handles: list, port: int, draft: bool = False, rank: int = 0,
                 address: str | None = None):
        import ray

        _, info_cls, engine_cls = require_cuda_vllm()
        info = info_cls(master_address=address or ray.util.get_node_ip_address(), master_port=port,
                        world_size=1 + len(handles), rank=rank)
        self.engine = engine_cls.trainer_init(info, client=VllmActorsClient(handles, draft), source=ShardSource(module))

    def send(self) -> None:
        """Broadcast the module's current parameters into every engine (blocks until they have loaded; in a
        gang every rank calls it at once)."""
        self.engine.send_weights()
