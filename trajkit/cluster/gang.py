"""A sharded policy on Ray: ``cluster.policy_workers=N`` (with ``policy.fsdp=true``) policy actors as one gang.

The N actors sit in the run's one placement group (bundles 0..N-1, :mod:`trajkit.cluster.placement`) and
join one ``torch.distributed`` process group (gloo on the CPU, NCCL on CUDA) at rank 0's address; each
builds and shards the policy exactly as a torchrun rank does (:func:`trajkit.rl.sharded.build_side`:
only rank 0 builds it whole, the others on the meta device, then receive their shards from rank 0) and
runs the same :class:`~trajkit.rl.sharded.ShardWorker`. Where torchrun's rank 0 broadcasts each learner
call to its peers, here the controller sends it to every actor at once (:class:`GangLearner`) and waits
for all of them (``cluster.timeout_s``); the answer is rank 0's. Weight sync: every actor gathers, rank 0
returns the full state dict, which goes through the object store to the rollout workers.

Checkpoints have the sharded layout (:mod:`trajkit.rl.sharded_checkpoint`): every actor writes its shard
into rank 0's temporary folder (so the gang's nodes must share the checkpoint's filesystem), rank 0 the
Hugging Face folder and the trainer state.
"""
from __future__ import annotations

import os
import socket
from trajkit.cluster.errors import gather


class ShardActor:
    """Rank ``rank`` of a gang of ``world`` policy actors (a Ray actor class)."""

    def __init__(self, cfg, rank: int, world: int):
        from trajkit.cluster.workers import _threads

        _threads(cfg)
        self.cfg, self.rank, self.world = cfg, rank, world

    def address(self) -> str:
        """``tcp://HOST:PORT`` for the gang's rendezvous (asked of rank 0: its node and a free port)."""
        import ray

        with socket.socket() as sock:
            sock.bind(("", 0))
            port = sock.getsockname()[1]
        return f"tcp://{ray.util.get_node_ip_address()}:{port}"

    def join(self, init_method: str) -> dict:
        """Join the gang's process group and build this rank's shard of the policy side."""
        from trajkit.rl.build import build_tokenizer
        from trajkit.rl.fsdp import init_group
        from trajkit.rl.sharded import ShardWorker, build_side

        shard, _ = init_group(self.cfg, self.rank, self.world, init_method)
        self.tokenizer = build_tokenizer(self.cfg)
        side = build_side(self.cfg, self.tokenizer, shard.rank)
        self.worker = ShardWorker(self.cfg, shard, side)
        p = side.policy
        return {"pid": os.getpid(), "rank": self.rank, "vocab_size": int(p.config.vocab_size),
                "device": str(next(p.parameters()).device)}

    def run(self, name: str, *args):
        """A :class:`~trajkit.rl.sharded.ShardWorker` call (every rank of the gang makes it together)."""
        return getattr(self.worker, name)(*args)

    def weights(self) -> dict | None:
        """Rank 0: ``{"policy": the gathered state dict, "draft": None}``; the others None (they gather too)."""
        full = self.worker.weights()
        return {"policy": full, "draft": None} if self.rank == 0 else None

    def init_nccl(self, handles: list, port: int, address: str) -> None:
        """Make vLLM's NCCL trainer engine over this rank's shards (:class:`trajkit.cluster.nccl.NcclSender`;
        rank 0 opens the group at ``address:port`` with the engines ``handles``; CUDA only)."""
        from trajkit.cluster.nccl import NcclSender

        self.sender = NcclSender(self.worker.side.policy, handles, port, rank=self.rank, address=address)

    def send_nccl(self) -> None:
        """One NCCL sync: every rank joins each parameter's gather, rank 0 broadcasts to the engines."""
        self.sender.send()

    def save(self, path: str, counters: dict) -> str:
        """Every rank writes its shard into rank 0's temporary folder; rank 0 publishes the checkpoint."""
        import torch.distributed as dist

        from trajkit.rl.sharded_checkpoint import save_checkpoint

        if self.rank != 0:
            folder = [None]
            dist.broadcast_object_list(folder, src=0)
            self.worker.save(folder[0])
            return path
        return save_checkpoint(self.worker.side, self.tokenizer, counters, path, self._save_shards)

    def _save_shards(self, folder: str) -> dict:
        """Rank 0: send the temporary folder to the peers, then write its own shard -> the gathered weights."""
        import torch.distributed as dist

        dist.broadcast_object_list([folder], src=0)
        return self.worker.save(folder)

    def load(self, path: str) -> dict | None:
        """Every rank loads its shard; rank 0 -> the controller's counters (step, stream, alarm)."""
        from pathlib import Path

        from trajkit.rl.checkpoint import counters_of, read_trainer_state
        from trajkit.rl.sharded_checkpoint import check_sharded

        blob = check_sharded(read_trainer_state(Path(path)), path)
        self.worker.load(path)
        return counters_of(blob) if self.rank == 0 else None


class GangLearner:
    """The :class:`~trajkit.rl.learner.Learner` over a gang of :class:`ShardActor` (controller side)."""

    def __init__(self, actors: list, timeout_s: float, transfer: str = "object_store"):
        self.actors, self.timeout_s, self.transfer = actors, timeout_s, transfer

    def _all(self, what: str, call) -> list:
        refs = [call(a) for a in self.actors]
        return gather(refs, [f"policy worker {i} {what}" for i in range(len(refs))], self.timeout_s)

    def push_weights(self, rollout) -> None:
        with rollout.lock:
            if self.transfer == "nccl":  # every rank gathers, rank 0 broadcasts (trajkit.cluster.nccl)
                self._all("NCCL weight send", lambda a: a.send_nccl.remote())
                rollout.backend.arrived()
                return
            refs = [a.weights.remote() for a in self.actors]
            gather(refs[1:], [f"policy worker {i} weight gather" for i in range(1, len(refs))], self.timeout_s)
            rollout.backend.load(refs[0])  # rank 0's full state, straight from the object store

    def logprobs(self, batch, step: int) -> dict:
        return self._all("logprobs", lambda a: a.run.remote("logprobs", batch, step))[0]

    def update(self, step: int) -> dict:
        return self._all("update", lambda a: a.run.remote("update", step))[0]

    def save(self, path: str, counters: dict) -> str:
        return self._all("save", lambda a: a.save.remote(path, counters))[0]

    def load(self, path: str) -> dict:
        return self._all("load", lambda a: a.load.remote(path))[0]


def start_gang(cfg, placement, env: dict) -> tuple[list, dict]:
    """``cluster.policy_workers`` :class:`ShardActor` in bundles 0..N-1 of ``placement``, joined into one
    process group -> (the actors, rank 0's info)."""
    from trajkit.backends.actors import require_ray, start_actor

    c = cfg.cluster
    n = c.policy_workers
    actors = [start_actor(ShardActor, (cfg, r, n), python=c.policy_python, env=env, **placement.options(r))
              for r in range(n)]
    try:
        address = gather([actors[0].address.remote()], ["policy worker 0 start"], c.timeout_s)[0]
        infos = gather([a.join.remote(address) for a in actors], [f"policy worker {r} join" for r in range(n)],
                       c.timeout_s)
    except BaseException:
        for a in actors:
            require_ray().kill(a)
        raise
    return actors, infos[0]
