"""Benchmark: prefill reuse, side by side in one run: the gateway's prefix cache on vs off, and a GRPO
group's shared prompt vs each row prefilling its own.

``session`` arms: one agent session of ``--turns`` chat calls against a real uvicorn server over SmolLM2
(``--model``, default the prepared SmolLM2-135M-Instruct), with a system prompt of ``--system-tokens``
tokens (a block of tool descriptions, as agent harnesses send) and a tool continuation each turn (the
model's reply, then a tool result). Per turn: prompt tokens, tokens served by the prefix cache, tokens
prefilled and the time to the first token (the record's ``first_token_s``), cache on and off; the replies
are checked to be the same token for token (greedy). Goals (issue 21): >= 80% of the prompt tokens of turns
2+ hit; TTFT >= 3x lower from turn 2.

``group`` arms: the generation stage of ``grpo_smollm2`` (task ``arith``, ``--prompts`` prompts x
``--group`` rows, temperature 0.7, ``--max-new-tokens``) through ``Engine.generate``, with
``share_prompts`` on and off: wall seconds, prefill tokens, and the prefill alone (``max_new_tokens=1``).
Rows are checked to be identical (same seeds).
"""
from __future__ import annotations

import statistics
import time

from trajkit.bench.output import emit

DESCRIPTION = "prefix cache on/off for a long agent session through the gateway; GRPO group prompt sharing on/off"
EXAMPLE = "trajkit bench prefix-cache --turns 5 --system-tokens 4096 --out bench-out/bench_prefix_cache.json"
TOOL_LINE = ("tool {i}: name=tool_{i} description=Reads or writes file number {i} of the workspace and returns "
             "its output as JSON with fields path, bytes, exit_code. parameters: path (string), mode (string).\n")


def add_arguments(parser) -> None:
    parser.add_argument("--model", default=None, help="local model folder (default: the prepared SmolLM2-135M-Instruct)")
    parser.add_argument("--turns", type=int, default=5, help="chat calls in the session (default: 5)")
    parser.add_argument("--system-tokens", type=int, default=4096, help="system prompt size in tokens (default: 4096)")
    parser.add_argument("--max-tokens", type=int, default=16, help="max_tokens per call (default: 16)")
    parser.add_argument("--prompts", type=int, default=2, help="group arms: prompts (default: 2, as grpo_smollm2)")
    parser.add_argument("--group", type=int, default=8, help="group arms: rows per prompt G (default: 8)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="group arms: tokens per row (default: 64)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: 2)")
    parser.add_argument("--out", default="bench-out/bench_prefix_cache.json", help="JSON output path")
    parser.add_argument("--json", action="store_true", help="print the JSON results instead of the table")


def _model_dir(args) -> str:
    if args.model:
        return args.model
    from trajkit.recipes.cache import cache_dir
    from trajkit.recipes.smollm2 import NAME

    return str(cache_dir() / NAME / "model")


def system_prompt(tokenizer, tokens: int) -> str:
    """Tool descriptions until the text is ``tokens`` tokens long (cut at a line)."""
    lines, n = [], 0
    while n < tokens:
        lines.append(TOOL_LINE.format(i=len(lines)))
        n += len(tokenizer.encode(lines[-1], add_special_tokens=False))
    return "You are an agent with these tools:\n" + "".join(lines[:-1])


def _session(gateway, url: str, args) -> list[dict]:
    import httpx

    system = system_prompt(gateway.tokenizer, args.system_tokens)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "List the files, then read a.txt."}]
    with httpx.Client(timeout=600) as http:
        for turn in range(args.turns):
            r = http.post(url + "/chat/completions", headers={"x-session-id": "bench"},
                          json={"model": "bench", "messages": messages, "max_tokens": args.max_tokens,
                                "temperature": 0})
            r.raise_for_status()
            reply = r.json()["choices"][0]["message"]["content"] or ""
            messages += [{"role": "assistant", "content": reply},
                         {"role": "user", "content": f"<tool_response>{{\"output\": \"file_{turn}.txt\", "
                                                     f"\"exit_code\": 0}}</tool_response>"}]
    rows = []
    for rec in gateway.sessions.find("bench").records:
        p = rec.prefix_cache
        rows.append({"prompt_tokens": p["query_tokens"], "hit_tokens": p["hit_tokens"], "prefill_tokens": p["new_tokens"],
                     "ttft_s": rec.timing["first_token_s"], "reply_ids": rec.choices[0].token_ids})
    return rows


def _session_arm(args, cache: bool) -> list[dict]:
    from trajkit.gateway import GatewayConfig, load_gateway, running

    config = GatewayConfig(model_name="bench", prefix_cache=cache, default_max_tokens=args.max_tokens)
    gateway = load_gateway(_model_dir(args), config)
    try:
        with running(gateway) as url:
            return _session(gateway, url, args)
    finally:
        gateway.close()


def _group_arm(args, share: bool) -> dict:
    from trajkit.engine import Engine, EngineConfig, SamplingParams
    from trajkit.models.load import load_model, load_tokenizer
    from trajkit.envs.single_turn import ChatArithmeticTask

    folder = _model_dir(args)
    task = ChatArithmeticTask(0, load_tokenizer(folder))
    prompts = [task.prompt(i).ids for i in range(args.prompts) for _ in range(args.group)]
    engine = Engine(load_model(folder), config=EngineConfig(share_prompts=share))
    params = SamplingParams(temperature=0.7, max_new_tokens=args.max_new_tokens, seed=0)
    start = time.perf_counter()
    first = engine.generate(prompts, SamplingParams(temperature=0.7, max_new_tokens=1, seed=0))
    prefill_s = time.perf_counter() - start
    start = time.perf_counter()
    out = engine.generate(prompts, params)
    return {"share_prompts": share, "rows": len(prompts), "prompt_tokens": out.stats.prompt_tokens,
            "prefill_tokens": out.stats.prefill_tokens, "prefill_s": prefill_s,
            "generate_s": time.perf_counter() - start, "new_tokens": out.stats.new_tokens,
            "tokens": [c.token_ids for c in out], "first": [c.token_ids for c in first]}


def run(args) -> int:
    import torch

    torch.set_num_threads(args.threads)
    on, off = _session_arm(args, True), _session_arm(args, False)
    same = [a["reply_ids"] for a in on] == [b["reply_ids"] for b in off]
    later = on[1:]
    hit_share = sum(r["hit_tokens"] for r in later) / max(1, sum(r["prompt_tokens"] for r in later))
    ttft_ratio = statistics.median(b["ttft_s"] for b in off[1:]) / statistics.median(a["ttft_s"] for a in later) \
        if later else 0.0
    shared, alone = _group_arm(args, True), _group_arm(args, False)
    group_same = shared.pop("tokens") == alone.pop("tokens") and shared.pop("first") == alone.pop("first")
    for arm in (on, off):
        for r in arm:
            r.pop("reply_ids")
    results = {"model": _model_dir(args), "turns": args.turns, "system_tokens": args.system_tokens,
               "max_tokens": args.max_tokens, "threads": args.threads,
               "session": {"cache_on": on, "cache_off": off, "replies_identical": same,
                           "turn2plus_hit_share": hit_share, "turn2plus_ttft_ratio": ttft_ratio,
                           "goals_met": hit_share >= 0.8 and ttft_ratio >= 3.0},
               "group": {"shared": shared, "alone": alone, "rows_identical": group_same,
                         "prefill_speedup": alone["prefill_s"] / shared["prefill_s"],
                         "generate_speedup": alone["generate_s"] / shared["generate_s"]}}
    emit(args, results, _table)
    return 0 if same and group_same else 1


def _table(r: dict) -> None:
    s = r["session"]
    print(f"gateway session: {r['turns']} turns, {r['system_tokens']}-token system prompt, max_tokens "
          f"{r['max_tokens']}, {r['model']}, {r['threads']} threads")
    print(f"{'turn':>4} {'prompt':>7} | {'hit':>6} {'prefill':>7} {'TTFT s':>7} | {'prefill':>7} {'TTFT s':>7} | "
          f"{'TTFT off/on':>11}")
    print(f"{'':>4} {'':>7} | {'cache on':^22} | {'cache off':^15} |")
    for i, (a, b) in enumerate(zip(s["cache_on"], s["cache_off"])):
        print(f"{i + 1:>4} {a['prompt_tokens']:>7} | {a['hit_tokens']:>6} {a['prefill_tokens']:>7} {a['ttft_s']:>7.3f} | "
              f"{b['prefill_tokens']:>7} {b['ttft_s']:>7.3f} | {b['ttft_s'] / a['ttft_s']:>10.2f}x")
    print(f"turns 2+: {100 * s['turn2plus_hit_share']:.1f}% of prompt tokens hit (goal >= 80%); median TTFT "
          f"{s['turn2plus_ttft_ratio']:.2f}x lower (goal >= 3x); replies identical: {s['replies_identical']}")
    g = r["group"]
    print(f"GRPO generation stage (arith, {g['shared']['rows']} rows = prompts x G): share_prompts on vs off")
    print(f"{'arm':<8} {'prompt tok':>10} {'prefilled':>9} {'prefill s':>9} {'generate s':>10}")
    for name, a in (("shared", g["shared"]), ("alone", g["alone"])):
        print(f"{name:<8} {a['prompt_tokens']:>10} {a['prefill_tokens']:>9} {a['prefill_s']:>9.3f} {a['generate_s']:>10.3f}")
    print(f"prefill {g['prefill_speedup']:.2f}x, whole stage {g['generate_speedup']:.2f}x; rows identical: "
          f"{g['rows_identical']}")
