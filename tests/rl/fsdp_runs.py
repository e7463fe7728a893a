"""Runs ``trajkit.rl.trainer.train`` on every rank of a torchrun launch, once per argument (a ``;``-separated
list of ``key=value`` overrides on the tests' tiny config), in one process group. Not a test: the sharded
tests launch it (``torchrun --nproc_per_node 2 tests/rl/fsdp_runs.py "a=1;b=2" "c=3"``). Each rank writes its
pid to ``pids/rank_N`` under the run's ``log.out_dir`` first (the failure test kills one), and a run that
raises on a rank writes the exception to ``errors/rank_N`` there and the launch goes on to the next run (a
failure the ranks agreed on leaves the process group usable)."""
import os
import sys
import traceback
from pathlib import Path

import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import TINY  # noqa: E402

from trajkit.progress import quiet_transformers  # noqa: E402
from trajkit.rl.config import load_config  # noqa: E402
from trajkit.rl.sharded import train  # noqa: E402


INIT = "init"  # a run whose first override is this only builds the sharded side and records it (init_run)


def init_run(cfg) -> None:
    """Build this rank's side (:func:`trajkit.rl.sharded.build_side`), run one forward, and save to
    ``init_rank_N.pt`` under ``log.out_dir``: its local parameter bytes, whether the output layer is still
    tied to the embeddings, the forward's logits, on rank 0 the gathered policy and reference, and what the
    NCCL weight transfer's source (:class:`trajkit.cluster.nccl.ShardSource`) declares and yields (rank 0: the
    tensors; the others: the shapes)."""
    import torch

    from trajkit.cluster.nccl import ShardSource
    from trajkit.rl.build import build_tokenizer
    from trajkit.rl.fsdp import full_state, local_bytes
    from trajkit.rl.sharded import build_side

    import trajkit.rl.sharded as sharded

    rank, built = dist.get_rank(), []
    whole_build = sharded.build_models  # counted, not replaced: which ranks build the whole model
    sharded.build_models = lambda *a, **k: built.append(1) or whole_build(*a, **k)
    try:
        side = build_side(cfg, build_tokenizer(cfg), rank)
    finally:
        sharded.build_models = whole_build
    p = side.policy
    with torch.no_grad():
        logits = p(torch.arange(2, 14).view(2, 6)).logits
    policy, reference = full_state(p), full_state(side.reference)
    source = ShardSource(p)  # the NCCL weight transfer's source: every rank iterates, each parameter gathered
    sent = [(name, tensor.clone() if rank == 0 else tuple(tensor.shape)) for name, tensor in source]
    torch.save({"bytes": local_bytes(p), "whole_builds": len(built), "tied": p.lm_head.weight is p.model.embed_tokens.weight,
                "logits": logits, "policy": policy, "reference": reference, "layout": source.layout(),
                "sent": sent},
               Path(cfg.log.out_dir) / f"init_rank_{rank}.pt")


def main(runs: list[str]) -> None:
    quiet_transformers()
    dist.init_process_group("gloo")
    for run in runs:
        overrides = [o for o in run.split(";") if o]
        only_init = overrides[:1] == [INIT]
        cfg = load_config(None, TINY + ["policy.fsdp=true"] + overrides[only_init:])
        pids = Path(cfg.log.out_dir) / "pids"
        pids.mkdir(parents=True, exist_ok=True)
        (pids / f"rank_{dist.get_rank()}").write_text(str(os.getpid()))
        try:
            init_run(cfg) if only_init else train(cfg)
        except Exception as exc:
            traceback.print_exc()
            errors = Path(cfg.log.out_dir) / "errors"
            errors.mkdir(exist_ok=True)
            (errors / f"rank_{dist.get_rank()}").write_text(f"{type(exc).__name__}: {exc}")
    dist.barrier()
    dist.destroy_process_group()


CALLS = {"n": 0}


def failing_reward(completions, **columns):
    """A reward function that raises on its second call (the failure test's step 2, on rank 0)."""
    CALLS["n"] += 1
    if CALLS["n"] == 2:
        raise RuntimeError("the reward server went away at step 2")
    return [0.0 for _ in completions]


if __name__ == "__main__":
    main(sys.argv[1:])
