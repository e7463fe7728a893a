"""Benchmark: peak training memory and step time of AdamW (full), LoRA (``peft``) and LoGRA on a real model.

One RL/SFT-like step on SmolLM2-135M-Instruct (prepared offline, :mod:`trajkit.recipes.smollm2`): forward
and backward of a token-level policy-gradient loss ``-sum_t A_b log p(x_t) / N`` over ``--rows`` sequences
of ``--length`` random token ids (``--micro-batch`` rows per backward, accumulated), then the optimiser
step; ``--steps`` such steps, the last one timed. Each arm runs in its own fresh child process, so its
memory is its own: on CPU the peak resident set size of that process (``ru_maxrss``, which includes
PyTorch itself and the loaded model: the ``after load`` column), on CUDA ``torch.cuda.max_memory_allocated``
over the steps. LoRA and LoGRA use the same rank (``--rank``) on the same seven projections per layer.
"""
from __future__ import annotations

import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

DESCRIPTION = "peak memory and step time of AdamW vs LoRA (peft) vs LoGRA on SmolLM2-135M-Instruct"
EXAMPLE = "trajkit bench optim --rows 8 --length 256 --rank 256 --out bench-out/optim.json"
ARMS = ("adamw", "lora", "logra")
PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def add_arguments(p) -> None:
    p.add_argument("--rows", type=int, default=8, help="sequences per step")
    p.add_argument("--length", type=int, default=256, help="tokens per sequence")
    p.add_argument("--micro-batch", type=int, default=8, help="rows per forward/backward (accumulated)")
    p.add_argument("--rank", type=int, default=256, help="LoRA and LoGRA rank")
    p.add_argument("--steps", type=int, default=2, help="optimiser steps per arm (the last one is timed)")
    p.add_argument("--lr", type=float, default=1e-5, help="learning rate of every arm")
    p.add_argument("--threads", type=int, default=0, help="torch threads in each child (0 = torch's default)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated subset of {','.join(ARMS)}")
    p.add_argument("--out", default="bench-out/optim.json", help="where to write the results (JSON)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")


def _rss_mib() -> float:
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def _optimizer(arm: str, model, rank: int, lr: float):
    import torch

    if arm == "adamw":
        return model, torch.optim.AdamW(model.parameters(), lr=lr)
    if arm == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0,
                                                 target_modules=PROJECTIONS))
        return model, torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    from trajkit.optim import LoGRA

    return model, LoGRA(model, lr=lr, rank=rank)


def _loss(model, ids, adv):
    """Token-level policy-gradient loss, summed (the caller divides by the step's token count)."""
    import torch

    logits = model(input_ids=ids).logits[:, :-1].float()
    logp = -torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
    return -(adv[:, None] * logp).sum()


def run_arm(arm: str, settings: dict) -> dict:
    """One arm in this (fresh) process -> its memory and timings."""
    import torch
    from transformers import AutoModelForCausalLM

    from trajkit.recipes.smollm2 import prepare_model

    if settings["threads"]:
        torch.set_num_threads(settings["threads"])
    device = torch.device(settings["device"])
    model = AutoModelForCausalLM.from_pretrained(str(prepare_model()), dtype=torch.float32).to(device).train()
    model, opt = _optimizer(arm, model, settings["rank"], settings["lr"])
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (settings["rows"], settings["length"]), generator=g).to(device)
    adv = torch.randn(settings["rows"], generator=g).to(device)
    after_load = _rss_mib()
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
            (_loss(model, ids[part], adv[part]) / tokens).backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    out = {"arm": arm, "step_s": seconds, "trainable_params": trainable, "peak_rss_mib": _rss_mib(),
           "after_load_rss_mib": after_load}
    if device.type == "cuda":
        out["cuda_peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
        out["cuda_before_step_mib"] = base_cuda
    return out


def _results(args, rows: list[dict]) -> dict:
    key = "cuda_peak_mib" if args.device == "cuda" else "peak_rss_mib"
    by_arm = {r["arm"]: r for r in rows}
    ref = by_arm.get("adamw", {}).get(key)
    for r in rows:
        r["peak_vs_adamw"] = r[key] / ref if ref else None
    return {"model": "SmolLM2-135M-Instruct (float32)", "device": args.device, "memory": key,
            "rows": args.rows, "length": args.length, "micro_batch": args.micro_batch, "rank": args.rank,
            "steps": args.steps, "arms": rows}


def _print_table(res: dict) -> None:
    key = res["memory"]
    print(f"{res['model']} on {res['device']}: {res['rows']} x {res['length']} tokens, micro-batch "
          f"{res['micro_batch']}, rank {res['rank']}; memory = {key}")
    print(f"{'arm':<7} {'trainable':>11} {'after load MiB':>15} {'peak MiB':>9} {'x AdamW':>8} {'step s':>7}")
    for r in res["arms"]:
        ratio = f"{r['peak_vs_adamw']:.2f}" if r["peak_vs_adamw"] else "-"
        print(f"{r['arm']:<7} {r['trainable_params']:>11,} {r['after_load_rss_mib']:>15.0f} {r[key]:>9.0f} "
              f"{ratio:>8} {r['step_s']:>7.2f}")


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
    settings = {k: getattr(args, k) for k in ("rows", "length", "micro_batch", "rank", "steps", "lr", "threads",
                                                 "device")}
    rows = []
    for arm in arms:  # a fresh process per arm: its peak memory is its own
        with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
            rows.append(pool.submit(run_arm, arm, settings).result())
    emit(args, _results(args, rows), _print_table)
    return 0
