"""Benchmark: peak training memory and step time of AdamW (full), LoRA (``peft``) and LoGRA on a real model.

One RL/SFT-like step on SmolLM2-135M-Instruct (prepared offline, :mod:`trajkit.recipes.smollm2`): forward
and backward of a token-level policy-gradient loss ``-sum_t A_b log p(x_t) / N`` over ``--rows`` sequences
of ``--length`` random token ids (``--micro-batch`` rows per backward, accumulated), then the optimiser
step; ``--steps`` such steps, the last one timed. Each arm runs in its own fresh child process, so its
memory is its own: on CPU the peak resident set size of that process (``VmHWM``, which includes
PyTorch itself and the loaded model: the ``after load`` column), on CUDA ``torch.cuda.max_memory_allocated``
over the steps. LoRA and LoGRA use the same rank (``--rank``) on the same seven projections per layer.
``logra`` is trajkit's default (the vocabulary matrices under RowAdam with in-place gradients,
:mod:`trajkit.optim.embeddings`); ``logra-nested`` leaves them to the nested AdamW, as the paper's
description does. ``muon`` is ``torch.optim.Muon`` on the projections with AdamW on the embedding and norms
(:mod:`trajkit.optim.muon`, ``match_rms_adamw`` so the same ``--lr``). ``trainable`` counts the parameters
the optimiser updates (LoGRA: all of them), ``Adam state`` those that carry AdamW's two moments, ``Muon
state`` those that carry Muon's one momentum buffer. Every arm's optimiser is the RL trainer's own, built by
its one registry at its ``optim`` defaults (:func:`trajkit.bench.optim_step.trainer_optimizer`: AdamW's betas
(0.9, 0.99), LoGRA's and Muon's knobs as ``trajkit train`` sets them), so the arms measure what training steps.

The ``runtime`` column is the process's RSS once Python, PyTorch, transformers (and peft or trajkit.optim)
are imported, before the model loads: the same in every arm and no part of training, so the table also
reports ``peak - runtime`` (the CPU analogue of CUDA's ``max_memory_allocated``, which excludes the CUDA
context) and its ratio. ``--checkpointing`` (activation checkpointing) and ``--logits-chunk N``
(:mod:`trajkit.models.logprobs`) shrink the activations that every arm pays alike, which is where an
optimiser's share of the peak shows.

``--allocator`` (CPU, glibc): ``mmap`` (default) makes every allocation of 128 KiB or more its own
mapping, returned to the system when freed, so the peak RSS follows the live tensors (what CUDA's
``max_memory_allocated`` counts) instead of the heap's high-water mark after fragmentation; ``default``
leaves glibc's adaptive threshold on (measured both ways in docs/optim.md).

``--model smollm2-360m-shape``: SmolLM2-360M's architecture (960 hidden, 32 layers, the same 49,152-token
tied embedding) with random weights built locally, to see how the ratios move with size (memory and time
do not depend on the weights' values).
"""
from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from trajkit.bench.optim_step import (
    MODELS,
    OPTIMIZERS,
    load_bench_model,
    mmap_large_allocations,
    peak_rss_mib,
    pg_loss,
)

DESCRIPTION = "peak memory and step time of AdamW vs LoRA (peft) vs LoGRA vs Muon on SmolLM2-135M-Instruct"
EXAMPLE = "trajkit bench optim --rows 8 --length 256 --rank 256 --out bench-out/optim.json"

ARMS = ("adamw", "lora", "logra", "logra-nested", "muon")
PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def add_arguments(p) -> None:
    p.add_argument("--rows", type=int, default=8, help="sequences per step")
    p.add_argument("--length", type=int, default=256, help="tokens per sequence")
    p.add_argument("--micro-batch", type=int, default=8, help="rows per forward/backward (accumulated)")
    p.add_argument("--rank", type=int, default=256, help="LoRA and LoGRA rank")
    p.add_argument("--lora-rank", type=int, default=0, help="the LoRA arm's rank when it differs from --rank "
                   "(0 = --rank; e.g. --lora-rank 32 beside LoGRA at 256)")
    p.add_argument("--steps", type=int, default=2, help="optimiser steps per arm (the last one is timed)")
    p.add_argument("--lr", type=float, default=1e-5, help="learning rate of every arm")
    p.add_argument("--checkpointing", action="store_true", help="activation checkpointing in every arm")
    p.add_argument("--logits-chunk", type=int, default=0,
                   help="log-probs N positions at a time (0 = the full [B, L, V] logits)")
    p.add_argument("--model", default="smollm2-135m", choices=sorted(MODELS),
                   help="the real SmolLM2-135M-Instruct, or a larger architecture with random weights")
    p.add_argument("--allocator", default="mmap", choices=("mmap", "default"),
                   help="CPU: mmap = large allocations returned when freed (peak RSS follows live tensors)")
    p.add_argument("--threads", type=int, default=0, help="torch threads in each child (0 = torch's default)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated subset of {','.join(ARMS)}")
    p.add_argument("--ranks", default="", metavar="N,M",
                   help="the arms that shard (adamw, logra, logra-nested, muon; lora is left out) with the model "
                        "sharded by FSDP2 over each count of ranks (1 = unsharded): memory per rank "
                        "(trajkit.bench.optim_ranks)")
    p.add_argument("--out", default="bench-out/optim.json", help="where to write the results (JSON)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")




def _updated(opt) -> list:
    """The parameters ``opt`` steps: those of its groups that get a gradient, and LoGRA's sketch targets
    (stepped from their sketches, without a ``.grad``); not a frozen weight a group holds (LoRA's base)."""
    sketched = {id(s.weight) for s in opt.sketches.states} if hasattr(opt, "sketches") else set()
    return [p for group in opt.param_groups for p in group["params"] if p.requires_grad or id(p) in sketched]


def _state_params(opt) -> tuple[int, int]:
    """(parameters with AdamW's two moments, parameters with Muon's momentum buffer) of ``opt``: LoGRA's
    nested AdamW (None when it has nothing left to step), MuonAdamW's two halves, or ``opt`` itself; a frozen
    parameter in a group (LoRA's base weights under the trainer's AdamW) never gets a gradient, so no state."""
    def count(o):
        return sum(p.numel() for p in _updated(o)) if o is not None else 0
    if hasattr(opt, "native"):
        return count(opt.native), 0
    if hasattr(opt, "muon"):
        return count(opt.adamw), count(opt.muon)
    return count(opt), 0


def run_arm(arm: str, settings: dict) -> dict:
    """One arm in this (fresh) process -> its memory and timings."""
    import torch
    import transformers.models.llama.modeling_llama  # noqa: F401  (counted in the runtime)
    from transformers import AutoModelForCausalLM  # noqa: F401

    from trajkit.recipes.smollm2 import prepare_model

    mmapped = settings["allocator"] == "mmap" and mmap_large_allocations()
    if arm == "lora":
        import peft  # noqa: F401  (counted in the runtime, as transformers is)
    else:
        import trajkit.optim  # noqa: F401
    from trajkit.rl.build import enable_activation_checkpointing

    if settings["threads"]:
        torch.set_num_threads(settings["threads"])
    device = torch.device(settings["device"])
    prepare_model()
    runtime = peak_rss_mib()
    model = load_bench_model(settings["model"], device)
    if settings["checkpointing"]:
        enable_activation_checkpointing(model)
    rank = (settings.get("lora_rank") or settings["rank"]) if arm == "lora" else settings["rank"]
    model, opt = OPTIMIZERS[arm](model, rank, settings["lr"])
    trainable = sum(p.numel() for p in _updated(opt))
    adam_params, muon_params = _state_params(opt)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (settings["rows"], settings["length"]), generator=g).to(device)
    adv = torch.randn(settings["rows"], generator=g).to(device)
    after_load = peak_rss_mib()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base_cuda = torch.cuda.memory_allocated() / 2**20
    seconds = 0.0
    tokens = settings["rows"] * (settings["length"] - 1)
    for _ in range(settings["steps"]):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for lo in range(0, settings["rows"], settings["micro_batch"]):
            part = slice(lo, lo + settings["micro_batch"])
            (pg_loss(model, ids[part], adv[part], settings["logits_chunk"]) / tokens).backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    peak = peak_rss_mib()
    out = {"arm": arm, "step_s": seconds, "trainable_params": trainable, "adam_state_params": adam_params,
           "muon_state_params": muon_params,
           "peak_rss_mib": peak, "after_load_rss_mib": after_load, "runtime_rss_mib": runtime,
           "training_rss_mib": peak - runtime, "large_allocations_mmapped": mmapped}
    if device.type == "cuda":
        out["cuda_peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
        out["cuda_before_step_mib"] = base_cuda
    return out


def _model_name(args) -> str:
    model = "SmolLM2-135M-Instruct" if MODELS[args.model] is None else f"{args.model} (random weights)"
    return f"{model} (float32)"


def _results(args, rows: list[dict]) -> dict:
    key = "cuda_peak_mib" if args.device == "cuda" else "peak_rss_mib"
    by_arm = {r["arm"]: r for r in rows}
    ref = by_arm.get("adamw", {}).get(key)
    ref_training = by_arm.get("adamw", {}).get("training_rss_mib")
    for r in rows:
        r["peak_vs_adamw"] = r[key] / ref if ref else None
        r["training_vs_adamw"] = r["training_rss_mib"] / ref_training if ref_training else None
    return {"model": _model_name(args), "device": args.device, "memory": key, "allocator": args.allocator,
            "rows": args.rows, "length": args.length, "micro_batch": args.micro_batch, "rank": args.rank,
            "lora_rank": args.lora_rank or args.rank,
            "steps": args.steps, "checkpointing": args.checkpointing, "logits_chunk": args.logits_chunk,
            "arms": rows}


def _print_table(res: dict) -> None:
    key = res["memory"]
    print(f"{res['model']} on {res['device']}: {res['rows']} x {res['length']} tokens, micro-batch "
          f"{res['micro_batch']}, rank {res['rank']} (LoRA {res.get('lora_rank', res['rank'])}), activation checkpointing "
          f"{'on' if res['checkpointing'] else 'off'}, logits chunk {res['logits_chunk'] or 'off'}; "
          f"memory = {key}, allocator {res['allocator']}")
    print(f"{'arm':<12} {'trainable':>11} {'Adam state':>11} {'Muon state':>11} {'runtime':>8} {'after load':>11} "
          f"{'peak MiB':>9} {'x AdamW':>8} {'peak-runtime':>13} {'x AdamW':>8} {'step s':>7}")

    def ratio(x):
        return f"{x:.2f}" if x else "-"
    for r in res["arms"]:
        print(f"{r['arm']:<12} {r['trainable_params']:>11,} {r['adam_state_params']:>11,} "
              f"{r['muon_state_params']:>11,} {r['runtime_rss_mib']:>8.0f} {r['after_load_rss_mib']:>11.0f} {r[key]:>9.0f} "
              f"{ratio(r['peak_vs_adamw']):>8} {r['training_rss_mib']:>13.0f} "
              f"{ratio(r['training_vs_adamw']):>8} {r['step_s']:>7.2f}")


def run(args) -> int:
    import torch

    from trajkit.bench.output import emit

    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    bad = [a for a in arms if a not in ARMS]
    if bad or not arms:
        raise SystemExit(f"--arms: unknown {bad}; choose from {', '.join(ARMS)}")
    if min(args.rows, args.length - 1, args.micro_batch, args.rank, args.steps) < 1:
        raise SystemExit("--rows, --micro-batch, --rank, --steps must be >= 1 and --length >= 2")
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.logits_chunk < 0:
        raise SystemExit("--logits-chunk must be >= 0")
    settings = {k: getattr(args, k) for k in ("rows", "length", "micro_batch", "rank", "lora_rank", "steps", "lr", "threads",
                                                 "device", "checkpointing", "logits_chunk", "model", "allocator")}
    if args.ranks:
        from trajkit.bench.optim_ranks import print_table
        from trajkit.bench.optim_ranks import run as run_ranks

        emit(args, run_ranks(args, settings, _model_name(args), arms), print_table)
        return 0
    rows = []
    for arm in arms:  # a fresh process per arm: its peak memory is its own
        with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
            rows.append(pool.submit(run_arm, arm, settings).result())
    emit(args, _results(args, rows), _print_table)
    return 0
