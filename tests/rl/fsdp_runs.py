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


def main(runs: list[str]) -> None:
    quiet_transformers()
    dist.init_process_group("gloo")
    for run in runs:
        cfg = load_config(None, TINY + ["policy.fsdp=true"] + [o for o in run.split(";") if o])
        pids = Path(cfg.log.out_dir) / "pids"
        pids.mkdir(parents=True, exist_ok=True)
        (pids / f"rank_{dist.get_rank()}").write_text(str(os.getpid()))
        try:
            train(cfg)
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
