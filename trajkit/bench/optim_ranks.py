"""``trajkit bench optim --ranks 1,2``: memory per rank of the policy update sharded with FSDP2 over N ranks.

The step of :mod:`trajkit.bench.optim` (forward and backward of a token-level policy-gradient loss over
``--rows`` sequences, then AdamW), with the model sharded as ``policy.fsdp=true`` shards it
(:func:`trajkit.rl.fsdp.shard_model`: per decoder layer + root) over N ranks, each rank backing
``--rows / N`` rows; N = 1 is the unsharded model. The N processes are spawned here and joined in one gloo
(CPU) or NCCL (CUDA) process group.

Per rank it reports what the rank holds, counted from its tensors: the parameters (its shards), the
gradients and AdamW's two moments (``state MiB``), and the process's memory: on the CPU the peak RSS of the
whole run (``peak``), the peak of building and sharding the model (``load peak``: as ``policy.fsdp=true``
builds it, rank 0 loads the whole float32 model, the other ranks build it on the meta device and receive
their shards from rank 0, :func:`trajkit.rl.fsdp.load_from_rank0`) and the peak during the training steps
alone (``step peak``: the high-water mark is reset after sharding, Linux only), on CUDA
``max_memory_allocated`` over the steps. The ``x 1 rank`` columns divide by the unsharded run's value.

Arms (``--arms``, those that shard): ``adamw``; ``logra`` / ``logra-nested`` (its RowAdam moments and
vocabulary state per row block, :mod:`trajkit.optim.shards`; its ``[out, rank]`` sketch buffers, whole on
every rank, count as gradients); ``muon`` (the momentum per shard, each matrix gathered for its
orthogonalisation, :mod:`trajkit.optim.muon_sharded`). ``lora`` is not sharded (``policy.fsdp`` refuses it).
"""
from __future__ import annotations

import os
import socket
import time
from multiprocessing import get_context

SHARDED_ARMS = ("adamw", "logra", "logra-nested", "muon")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _reset_peak() -> bool:
    """Reset this process's RSS high-water mark (``VmHWM``) to its current RSS; False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _state_mib(model, opt) -> tuple[float, float, float]:
    """(parameters, gradients, optimiser state) this rank holds, MiB (a DTensor counts its local shard). LoGRA:
    its sketch buffers count as gradients, its row moments (and masters) as state."""
    def local(t):
        t = t.to_local() if hasattr(t, "to_local") else t
        return t.numel() * t.element_size()
    params = sum(local(p) for p in model.parameters())
    grads = sum(local(p.grad) for p in model.parameters() if p.grad is not None)
    state = sum(local(v) for s in opt.state.values() for v in s.values() if hasattr(v, "numel") and v.dim() > 0)
    if hasattr(opt, "sketches"):
        grads += sum(local(s.sketch) for s in opt.sketches.states if s.sketch is not None)
        state += sum(local(v) for extra in opt.sketch_state + opt.row_state for v in extra.values())
    return params / 2**20, grads / 2**20, state / 2**20


def _steps(model, opt, ids, adv, settings, device) -> float:
    """``settings["steps"]`` optimiser steps on this rank's rows; -> seconds of the last."""
    import torch

    from trajkit.bench.optim_step import pg_loss

    tokens = settings["rows"] * (settings["length"] - 1)  # the whole step's tokens: gradients are summed
    seconds = 0.0
    for _ in range(settings["steps"]):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=False)  # keep the gradients for the count below
        for lo in range(0, len(ids), settings["micro_batch"]):
            part = slice(lo, lo + settings["micro_batch"])
            (pg_loss(model, ids[part], adv[part]) / tokens).backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    return seconds


def run_rank(arm: str, rank: int, world: int, port: int, settings: dict, results) -> None:
    """One rank of an N-rank run (a fresh spawned process): load, shard, train; its numbers into ``results``."""
    import torch

    from trajkit.bench.optim_step import load_bench_model, mmap_large_allocations, peak_rss_mib

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if settings["allocator"] == "mmap":
        mmap_large_allocations()
    if settings["threads"]:
        torch.set_num_threads(settings["threads"])
    device = torch.device(settings["device"])
    if world > 1:
        import torch.distributed as dist

        if device.type == "cuda":
            torch.cuda.set_device(rank)
            device = torch.device("cuda", rank)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=world)
    model = load_bench_model(settings["model"], device, empty=rank > 0)
    if settings["checkpointing"]:
        from trajkit.rl.build import enable_activation_checkpointing

        enable_activation_checkpointing(model)
    if world > 1:
        from trajkit.rl.fsdp import load_from_rank0, shard_model

        whole = model.state_dict() if rank == 0 else None
        shard_model(model, torch.float32)
        load_from_rank0(model, whole, device)
        del whole
    from trajkit.bench.optim_step import OPTIMIZERS

    model, opt = OPTIMIZERS[arm](model, settings["rank"], settings["lr"])
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (settings["rows"], settings["length"]), generator=g)
    adv = torch.randn(settings["rows"], generator=g)
    own = slice(rank * settings["rows"] // world, (rank + 1) * settings["rows"] // world)
    ids, adv = ids[own].to(device), adv[own].to(device)
    after_load = peak_rss_mib()  # the high-water mark so far: loading the whole model, then sharding it
    reset = _reset_peak()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    seconds = _steps(model, opt, ids, adv, settings, device)
    params, grads, state = _state_mib(model, opt)
    peak = peak_rss_mib()
    out = {"ranks": world, "rank": rank, "arm": arm, "step_s": seconds, "params_mib": params, "grads_mib": grads,
           "optim_state_mib": state, "peak_rss_mib": max(peak, after_load), "load_peak_rss_mib": after_load,
           "step_peak_rss_mib": peak if reset else None}
    if device.type == "cuda":
        out["cuda_peak_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
    if world > 1:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    results.put(out)


def run_ranks(arm: str, world: int, settings: dict, timeout_s: float = 3600.0) -> list[dict]:
    """An N-rank run of ``arm`` in N spawned processes -> one row per rank (rank order)."""
    ctx = get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=run_rank, args=(arm, r, world, port, settings, results)) for r in range(world)]
    for p in procs:
        p.start()
    rows = []
    try:
        for _ in procs:
            rows.append(results.get(timeout=timeout_s))
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    bad = [p.exitcode for p in procs if p.exitcode]
    if bad:
        raise SystemExit(f"bench optim --ranks {world}: a rank exited with {bad[0]}")
    return sorted(rows, key=lambda r: r["rank"])


COLUMNS = ("params_mib", "grads_mib", "optim_state_mib", "peak_rss_mib", "load_peak_rss_mib", "step_peak_rss_mib",
           "cuda_peak_mib")


def ratios(rows: list[dict]) -> None:
    """Each row's ``x1_<column>``: its value over the same arm's 1-rank run's (None when ``--ranks`` has no 1)."""
    for r in rows:
        base = min((b for b in rows if b["arm"] == r["arm"]), key=lambda b: (b["ranks"], b["rank"]))
        for key in COLUMNS:
            if r.get(key) is not None and base.get(key):
                r[f"x1_{key}"] = r[key] / base[key] if base["ranks"] == 1 else None


def print_table(res: dict) -> None:
    print(f"{res['model']} on {res['device']}: {res['rows']} x {res['length']} tokens per step (split over the "
          f"ranks), micro-batch {res['micro_batch']}, FSDP2 per decoder layer + root")
    print(f"{'arm':<12} {'ranks':>5} {'rank':>4} {'params MiB':>10} {'grads MiB':>9} {'state MiB':>9} {'x 1 rank':>8} "
          f"{'load peak':>9} {'step peak':>9} {'x 1 rank':>8} {'step s':>7}")

    def fmt(x, spec):
        return format(x, spec) if x is not None else "-"
    for r in res["ranks_rows"]:
        print(f"{r['arm']:<12} {r['ranks']:>5} {r['rank']:>4} {r['params_mib']:>10.1f} {r['grads_mib']:>9.1f} "
              f"{r['optim_state_mib']:>9.1f} {fmt(r.get('x1_optim_state_mib'), '.2f'):>8} "
              f"{r['load_peak_rss_mib']:>9.0f} {fmt(r.get('step_peak_rss_mib'), '.0f'):>9} "
              f"{fmt(r.get('x1_step_peak_rss_mib'), '.2f'):>8} {r['step_s']:>7.2f}")


def run(args, settings: dict, model_name: str, arms: list[str]) -> dict:
    """``--ranks``: one run per arm and world size -> the results (``ranks_rows``: a row per rank of every run)."""
    try:
        worlds = sorted({int(n) for n in args.ranks.split(",")})
    except ValueError:
        raise SystemExit(f"--ranks: a comma-separated list of rank counts, got {args.ranks!r}") from None
    if not worlds or worlds[0] < 1 or any(settings["rows"] % n for n in worlds):
        raise SystemExit(f"--ranks {args.ranks}: each count must be >= 1 and divide --rows {settings['rows']}")
    arms = [a for a in arms if a in SHARDED_ARMS]
    if not arms:
        raise SystemExit(f"--ranks: none of --arms shards; choose from {', '.join(SHARDED_ARMS)}")
    rows = [row for arm in arms for n in worlds for row in run_ranks(arm, n, settings)]
    ratios(rows)
    return {"model": model_name, "device": settings["device"], "rows": settings["rows"],
            "length": settings["length"], "micro_batch": settings["micro_batch"], "steps": settings["steps"],
            "checkpointing": settings["checkpointing"], "allocator": settings["allocator"], "ranks_rows": rows}
