"""Benchmark: rollout tokens/s of each generation backend on SmolLM2-135M-Instruct, side by side.

``--batch`` rows (SmolLM2 chat prompts, one per row) x ``--tokens`` new tokens each, temperature 1,
seeded, no stop ids, so every arm generates exactly ``batch x tokens`` tokens. Each arm: build the backend
(trajkit: the engine in this process; vllm: vLLM's offline engine in its venv behind a Ray actor, the time
to start it reported apart), one warm-up call of 8 tokens, then ``--repeats`` timed calls; tokens/s is the
best repeat's (wall clock around ``generate``, the actor round trip included for vLLM). Both arms run
float32 on the CPU (vLLM eager). ``trajkit-ray2``/``vllm-ray2``: the same backend behind 2 Ray rollout
workers (:class:`trajkit.cluster.split.RayRollouts`, the rows split 4/4), as a ``cluster.ray=true`` run
generates; their start time includes the workers'. The ``vs trajkit`` column is the arm's tokens/s over
trajkit's. The machine's load average at the start and the end is recorded beside the numbers.
``--task harbor``: the same arms time Harbor episodes through the gateway instead (episodes/s;
:mod:`trajkit.bench.rollout_agent`).
"""
from __future__ import annotations

import time

DESCRIPTION = "rollout tokens/s: trajkit's engine vs the vLLM backend on SmolLM2-135M-Instruct"
EXAMPLE = ("trajkit bench rollout --batch 8 --tokens 128 --out bench-out/rollout.json; Harbor episodes/s: "
           "trajkit bench rollout --task harbor --episodes 4 --tokens 48 --out bench-out/rollout-harbor.json")
ARMS = ("trajkit", "vllm", "trajkit-ray2", "vllm-ray2")
RAY_WORKERS = 2  # rollout workers of the "-ray2" arms
QUESTIONS = ["What is 3 + 4?", "Name a color.", "Write one word.", "Say hello.", "What is 9 - 2?",
             "Count to three.", "Name a fruit.", "What day follows Monday?"]


def add_arguments(p) -> None:
    p.add_argument("--batch", type=int, default=8, help="rows per generate call (default 8)")
    p.add_argument("--tokens", type=int, default=128, help="new tokens per row (default 128)")
    p.add_argument("--repeats", type=int, default=2, help="timed calls per arm; the best counts (default 2)")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    p.add_argument("--threads", type=int, default=0, help="torch threads for the trajkit arm (0: torch's default)")
    p.add_argument("--out", default="bench-out/rollout.json", help="JSON results file")
    p.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    from trajkit.bench.rollout_agent import add_arguments as agent_arguments

    agent_arguments(p)


def _prompts(folder: str, batch: int) -> list[list[int]]:
    from trajkit.models.load import load_tokenizer

    tok = load_tokenizer(folder, what="smollm2")
    rows = [[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}] for i in range(batch)]
    return [list(tok.apply_chat_template(m, add_generation_prompt=True, tokenize=True, return_dict=False))
            for m in rows]


class _RayArm:
    """``RAY_WORKERS`` rollout workers of one backend kind as a backend (closed with their placement); its
    ``rollouts`` (:class:`~trajkit.cluster.split.RayRollouts`) run an agent task's episodes."""

    def __init__(self, kind: str, folder: str, threads: int):
        from trajkit.backends.actors import ensure_ray
        from trajkit.cluster.placement import place
        from trajkit.cluster.trainer import start_rollouts
        from trajkit.rl.config import load_config

        cfg = load_config(None, ["policy.source=path", f"policy.path={folder}", f"rollout.backend={kind}",
                                 f"threads={threads}", "cluster.ray=true", f"cluster.rollout_workers={RAY_WORKERS}",
                                 "rollout.vllm_max_model_len=1024"])
        self.owns_ray = ensure_ray(RAY_CPUS)
        self.placement = place("colocated", RAY_WORKERS, cfg.cluster.worker_cpus, 0.0, cfg.cluster.timeout_s)
        self.rollouts = start_rollouts(cfg, self.placement, first_bundle=1)
        self.generate = self.rollouts.generate
        self.capabilities = self.rollouts.capabilities

    def close(self) -> None:
        import ray

        self.rollouts.close()
        self.placement.remove()
        if self.owns_ray:
            ray.shutdown()


RAY_CPUS = 8  # logical CPUs of the benchmark's local Ray: accounting only, the arms share the real cores


def _backend(arm: str, folder: str, threads: int = 0):
    """The arm's backend: ``NAME-ray2`` its Ray workers, else the one builder's ``NAME`` over ``folder``
    (trajkit's loader reads it in float32; vLLM's context 1024)."""
    from trajkit.backends.build import BackendSpec, build_backend

    if arm.endswith("-ray2"):
        return _RayArm(arm.removesuffix("-ray2"), folder, threads)
    from trajkit.recipes.cache import vllm_python

    return build_backend(BackendSpec(backend=arm, model=folder, python=vllm_python(), max_model_len=1024))


def _measure(arm: str, folder: str, prompts, args) -> dict:
    from trajkit.engine import SamplingParams

    started = time.perf_counter()
    backend = _backend(arm, folder, args.threads)
    start_s = time.perf_counter() - started
    try:
        backend.generate(prompts, SamplingParams(max_new_tokens=8, seed=0))
        best = None
        for r in range(args.repeats):
            t0 = time.perf_counter()
            out = backend.generate(prompts, SamplingParams(max_new_tokens=args.tokens, seed=r))
            seconds = time.perf_counter() - t0
            tokens = sum(len(c.token_ids) for c in out)
            if best is None or seconds < best[0]:
                best = (seconds, tokens)
    finally:
        backend.close()
    import os

    return {"arm": arm, "start_s": start_s, "seconds": best[0], "tokens": best[1],
            "tokens_per_s": best[1] / best[0], "load_after": os.getloadavg()[0]}


def _table(results: dict) -> None:
    base = next((a["tokens_per_s"] for a in results["arms"] if a["arm"] == "trajkit"), None)
    print(f"rollout B={results['batch']} x {results['tokens']} tokens, SmolLM2-135M-Instruct float32 CPU")
    print(f"load average {results['load_start']:.2f} at the start, {results['load_end']:.2f} at the end")
    print(f"{'arm':<14}{'start s':>10}{'tokens':>8}{'seconds':>10}{'tokens/s':>10}{'vs trajkit':>12}{'load after':>12}")
    for a in results["arms"]:
        ratio = f"{a['tokens_per_s'] / base:.2f}x" if base else "-"
        print(f"{a['arm']:<14}{a['start_s']:>10.1f}{a['tokens']:>8}{a['seconds']:>10.2f}"
              f"{a['tokens_per_s']:>10.1f}{ratio:>12}{a['load_after']:>12.2f}")


def run(args) -> int:
    import torch

    from trajkit.bench.output import emit
    from trajkit.errors import ConfigError
    from trajkit.recipes.smollm2 import prepare_model

    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    bad = [a for a in arms if a not in ARMS]
    if bad:
        raise ConfigError(f"--arms: unknown arm(s) {', '.join(bad)}; use {', '.join(ARMS)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    folder = str(prepare_model())
    prompts = _prompts(folder, args.batch)
    import os

    load_start = os.getloadavg()[0]
    if args.task == "harbor":
        from trajkit.bench.rollout_agent import measure_episodes, table

        measured = [measure_episodes(a, folder, args, _backend) for a in arms]
        results = {"task": "harbor", "episodes": args.episodes, "max_turns": args.max_turns, "tokens": args.tokens,
                   "threads": args.threads, "load_start": load_start, "load_end": os.getloadavg()[0],
                   "arms": measured}
        emit(args, results, table)
        return 0
    measured = [_measure(a, folder, prompts, args) for a in arms]
    results = {"batch": args.batch, "tokens": args.tokens, "repeats": args.repeats, "threads": args.threads,
               "load_start": load_start, "load_end": os.getloadavg()[0], "arms": measured}
    emit(args, results, _table)
    return 0
