"""Benchmark: the gateway under concurrent multi-turn clients: continuous batching, per-call batching, serial.

``--sessions`` client threads each run ``--turns`` chat calls (the conversation carried forward, the
session bound by its API key) against a real uvicorn server on a loopback port, over a tiny random
byte-vocabulary model (or ``--model DIR``). Three arms in one process, each on a fresh server:
``continuous`` (requests join the running batch between decode steps, ``max_batch`` rows), ``per-call``
(the scheduler collects the requests waiting together into one ``Engine.generate`` call; a request that
arrives during a call waits for it) and ``serial`` (``max_batch=1``, one request at a time: the
no-batching baseline). "Engine calls" are prefills: admissions for ``continuous``, generate calls else. Reported per arm: requests/s,
p50/p95 latency, engine calls, mean rows per call; and every session is checked to hold ``turns``
records stitched into one chain (so the numbers are for traffic that was recorded correctly).

``--long-tokens N``: every other session asks for ``N`` tokens per call (mixed lengths, where continuous
batching matters: a short request no longer waits for the long ones of its call); the short sessions'
p50/p95 are reported apart. ``--drafter ngram`` puts the prompt-lookup drafter in every arm's engine
(``num_draft_tokens`` = ``--k``): the continuous arm then runs speculative rounds.
"""
from __future__ import annotations

import statistics

from trajkit.bench.output import emit

DESCRIPTION = "gateway load: concurrent multi-turn sessions, requests/s and p50/p95 latency, batched vs serial"
EXAMPLE = "trajkit bench gateway --sessions 32 --turns 5 --max-tokens 16 --out bench-out/bench_gateway.json"


def add_arguments(parser) -> None:
    parser.add_argument("--sessions", type=int, default=32, help="concurrent client sessions (default: 32)")
    parser.add_argument("--turns", type=int, default=5, help="chat calls per session (default: 5)")
    parser.add_argument("--max-tokens", type=int, default=16, help="max_tokens per call (default: 16)")
    parser.add_argument("--long-tokens", type=int, default=0,
                        help="every other session asks for this many tokens per call (0 = all the same)")
    parser.add_argument("--drafter", default="none", choices=("none", "ngram"), help="drafter in the engine")
    parser.add_argument("--k", type=int, default=3, help="drafts per round with --drafter (default: 3)")
    parser.add_argument("--model", default=None, help="local model folder (default: a tiny random byte model)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    parser.add_argument("--out", default="bench-out/bench_gateway.json", help="JSON output path")
    parser.add_argument("--json", action="store_true", help="print the JSON results instead of the table")


def _gateway(args, max_batch: int, continuous: bool):
    """The gateway of one arm over the backend the one builder makes of ``--model``/``--drafter``/``--k``
    (a tiny random byte model without ``--model``)."""
    from trajkit.backends.build import BackendSpec, build_backend
    from trajkit.gateway import Gateway, GatewayConfig, load_gateway

    config = GatewayConfig(model_name="bench", max_batch=max_batch, default_max_tokens=args.max_tokens,
                           continuous=continuous)
    spec = BackendSpec(model=args.model, drafter=args.drafter, k=args.k)
    if args.model:
        return load_gateway(args.model, config, spec=spec)
    from trajkit.models.spec import TinySpec, build_model
    from trajkit.models.tokenizer import byte_tokenizer

    model = build_model(TinySpec(vocab_size=259, hidden_size=64, num_layers=2, max_positions=4096), seed=0,
                        init_scale=5.0)
    return Gateway(build_backend(spec, target=model), byte_tokenizer(), config)


def _arm(args, max_batch: int, continuous: bool = True) -> dict:
    from trajkit.gateway import running
    from trajkit.gateway.load import run_load
    from trajkit.gateway.stitch import stitch

    gateway = _gateway(args, max_batch, continuous)
    try:
        with running(gateway) as url:
            out = run_load(url, args.sessions, args.turns, args.max_tokens, "bench", long_tokens=args.long_tokens)
    finally:
        gateway.close()
    lat, short = sorted(out["latencies"]), sorted(out["short_latencies"])
    ok = all(len(s.records) == args.turns and len(stitch(s.records)) == 1 for s in gateway.sessions.all())
    return {"max_batch": max_batch, "continuous": gateway.scheduler.continuous, "requests": out["requests"], "seconds": out["seconds"],
            "requests_per_s": out["requests"] / out["seconds"], "p50_s": statistics.median(lat),
            "p95_s": lat[min(len(lat) - 1, int(0.95 * len(lat)))], "engine_calls": gateway.scheduler.calls,
            "rows_per_call": out["requests"] / max(1, gateway.scheduler.calls), "sessions_ok": ok,
            "short_p50_s": statistics.median(short), "short_p95_s": short[min(len(short) - 1, int(0.95 * len(short)))]}


def run(args) -> int:
    import torch

    torch.set_num_threads(args.threads)
    arms = {"continuous": _arm(args, 64), "per-call": _arm(args, 64, continuous=False),
            "serial": _arm(args, 1, continuous=False)}
    results = {"sessions": args.sessions, "turns": args.turns, "max_tokens": args.max_tokens,
               "long_tokens": args.long_tokens, "drafter": args.drafter, "k": args.k if args.drafter != "none" else 0,
               "model": args.model or "tiny random byte model (d=64, 2 layers)", "threads": args.threads,
               "arms": arms, "speedup": arms["continuous"]["requests_per_s"] / arms["serial"]["requests_per_s"],
               "speedup_over_per_call": arms["continuous"]["requests_per_s"] / arms["per-call"]["requests_per_s"]}
    emit(args, results, _table)
    return 0 if all(a["sessions_ok"] for a in arms.values()) else 1


def _table(r: dict) -> None:
    mixed = f" (every other session {r['long_tokens']})" if r["long_tokens"] else ""
    drafter = f", drafter {r['drafter']} k={r['k']}" if r["drafter"] != "none" else ""
    print(f"{r['sessions']} sessions x {r['turns']} turns, max_tokens {r['max_tokens']}{mixed}{drafter}, {r['model']}")
    short = r["long_tokens"] > 0
    print(f"{'arm':<10} {'req/s':>8} {'p50 s':>8} {'p95 s':>8}" + (f" {'short p50':>9} {'short p95':>9}" if short else "")
          + f" {'calls':>6} {'rows/call':>9} {'records ok':>10}")
    for name, a in r["arms"].items():
        extra = f" {a['short_p50_s']:9.3f} {a['short_p95_s']:9.3f}" if short else ""
        print(f"{name:<10} {a['requests_per_s']:8.1f} {a['p50_s']:8.3f} {a['p95_s']:8.3f}{extra} {a['engine_calls']:6d} "
              f"{a['rows_per_call']:9.1f} {a['sessions_ok']!s:>10}")
    print(f"continuous / serial requests/s: {r['speedup']:.2f}x; continuous / per-call: "
          f"{r['speedup_over_per_call']:.2f}x")
