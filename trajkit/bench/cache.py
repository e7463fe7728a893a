"""Benchmark: how much of an agent's prefill a prefix cache would save, replayed from recorded traces.

Each conversation of ``TRACES`` is replayed call by call as a harness sends it: before every assistant
turn, the whole history rendered by ``--tokenizer``'s chat template (or ``--chat-template FILE``) with the
generation prompt, tokenized. After the call the server holds that prompt plus the reply (the assistant
turn as the template renders it when it is last). For each call, against everything the conversation's
earlier calls left (exact prefix matching over token ids, as :mod:`trajkit.engine.prefix` does, but at
token rather than block granularity):

- ``hit``: the longest prefix of the prompt that an earlier call's tokens start with (reused exactly);
- ``new``: the rest, prefilled again;
- ``displaced``: tokens of ``new`` lying in runs of >= ``--run`` tokens that occur in an earlier call's
  tokens at another position (covered by ``--gram``-token windows seen before): what approximate suffix
  reuse (re-rotated RoPE keys) could recover after an edit, and exact reuse cannot.

Two variants: ``kept`` sends every earlier assistant turn with its reasoning (the template may still drop
it: Qwen3-style templates render reasoning only after the last user message), ``stripped`` sends earlier
turns without reasoning (what many harnesses do). Reported token-weighted, overall and per turn type:
``tool`` (the call after a tool result: a tool continuation), ``user`` (after a new user message, not the
first), ``first`` (the conversation's first call, nothing cached).
"""
from __future__ import annotations

import copy

from trajkit.bench.output import emit

DESCRIPTION = "replay traces through a chat template: exact prefix hits, new and displaced tokens per turn type"
EXAMPLE = ("trajkit bench cache trajkit/data/sample/kimi.jsonl.xz --tokenizer ~/.cache/trajkit/smollm2-135m-instruct/"
           "tokenizer --out bench-out/bench_cache.json")
TYPES = ("first", "user", "tool")


def add_arguments(parser) -> None:
    parser.add_argument("traces", nargs="+", help="trace files (Hermes ShareGPT / OpenAI JSONL, .xz ok)")
    parser.add_argument("--tokenizer", required=True, help="local tokenizer folder (its chat template renders)")
    parser.add_argument("--chat-template", default=None, help="a Jinja chat template file used instead")
    parser.add_argument("--limit", type=int, default=0, help="at most this many conversations (0 = all)")
    parser.add_argument("--gram", type=int, default=16, help="window that detects displaced tokens (default: 16)")
    parser.add_argument("--run", type=int, default=64, help="shortest reusable displaced run (default: 64)")
    parser.add_argument("--out", default="bench-out/bench_cache.json", help="JSON output path")
    parser.add_argument("--json", action="store_true", help="print the JSON results instead of the table")


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two id lists."""
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def displaced(new: list[int], offset: int, seen: dict[tuple[int, ...], set[int]], gram: int, run: int) -> int:
    """Tokens of ``new`` (the prompt from position ``offset`` on) in runs of >= ``run`` tokens covered by
    ``gram``-token windows that ``seen`` (window -> its start positions in earlier calls) holds at a
    position other than the one it has here."""
    covered = [False] * len(new)
    for i in range(len(new) - gram + 1):
        starts = seen.get(tuple(new[i:i + gram]))
        if starts and any(s != offset + i for s in starts):
            covered[i:i + gram] = [True] * gram
    total = length = 0
    for c in covered + [False]:
        if c:
            length += 1
        else:
            total += length if length >= run else 0
            length = 0
    return total


def _windows(ids: list[int], gram: int, into: dict[tuple[int, ...], set[int]]) -> None:
    for i in range(len(ids) - gram + 1):
        into.setdefault(tuple(ids[i:i + gram]), set()).add(i)


def replay(calls: list[tuple[str, list[int], list[int]]], gram: int, run: int) -> list[dict]:
    """``calls``: (turn type, prompt ids, prompt + reply ids) in order -> per call {type, prompt, hit, new,
    displaced}."""
    held: list[list[int]] = []
    seen: dict[tuple[int, ...], set[int]] = {}
    out = []
    for kind, prompt, after in calls:
        hit = max((common_prefix(prompt, h) for h in held), default=0)
        out.append({"type": kind, "prompt": len(prompt), "hit": hit, "new": len(prompt) - hit,
                    "displaced": displaced(prompt[hit:], hit, seen, gram, run)})
        held.append(after)
        _windows(after, gram, seen)
    return out


def conversation_calls(conv, tokenizer, strip: bool) -> list[tuple[str, list[int], list[int]]]:
    """The calls a harness makes for ``conv`` (a :class:`trajkit.traces.export.sft_render.ChatConversation`)."""
    from trajkit.traces.export.sft_render import NO_REASONING, REASONING

    def render(messages, generation: bool) -> str:
        clean = [{k: v for k, v in m.items() if k not in (NO_REASONING, REASONING)} for m in messages]
        return tokenizer.apply_chat_template(clean, tools=conv.tools, tokenize=False, add_generation_prompt=generation)

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    calls = []
    for i, msg in enumerate(conv.messages):
        if msg["role"] != "assistant" or i == 0:
            continue
        history = [_without_reasoning(m) if strip else m for m in conv.messages[:i]]
        prompt_text = render(history, True)
        full_text = render(history + [msg], False)
        prompt = encode(prompt_text)
        reply = encode(full_text[len(prompt_text):]) if full_text.startswith(prompt_text) else []
        kind = "first" if not calls else ("tool" if conv.messages[i - 1]["role"] in ("tool", "ipython") else "user")
        calls.append((kind, prompt, prompt + reply))
    return calls


def _without_reasoning(message: dict) -> dict:
    from trajkit.traces.export.sft_render import NO_REASONING

    if message["role"] != "assistant":
        return message
    out = copy.copy(message)
    out.pop("reasoning_content", None)
    if NO_REASONING in out:
        out["content"] = out[NO_REASONING]
    return out


def summarize(rows: list[dict]) -> dict:
    """Token-weighted totals, overall and per turn type."""
    def total(sel):
        prompt = sum(r["prompt"] for r in sel)
        hit, new, disp = (sum(r[k] for r in sel) for k in ("hit", "new", "displaced"))
        return {"calls": len(sel), "prompt_tokens": prompt, "hit_tokens": hit, "new_tokens": new,
                "displaced_tokens": disp, "hit_rate": hit / prompt if prompt else 0.0,
                "displaced_share_of_new": disp / new if new else 0.0}
    return {"all": total(rows), **{t: total([r for r in rows if r["type"] == t]) for t in TYPES}}


def run(args) -> int:
    from trajkit.models.load import load_tokenizer
    from trajkit.traces.load import iter_traces
    from trajkit.traces.export.sft_render import render_trace
    from trajkit.traces.export.template_probe import choose_rendering, probe_template

    tokenizer = load_tokenizer(args.tokenizer, what="--tokenizer")
    if args.chat_template:
        with open(args.chat_template, encoding="utf-8") as fh:
            tokenizer.chat_template = fh.read()
    rendering = choose_rendering(probe_template(tokenizer))
    convs, skipped = [], 0
    for trace in iter_traces(args.traces, on_error=lambda exc: None):
        try:
            convs.append(render_trace(trace, rendering, malformed="as_text"))
        except Exception:  # noqa: BLE001 - a conversation the template refuses is counted, not fatal
            skipped += 1
        if args.limit and len(convs) >= args.limit:
            break
    variants = {}
    for name, strip in (("kept", False), ("stripped", True)):
        rows = [r for conv in convs for r in replay(conversation_calls(conv, tokenizer, strip), args.gram, args.run)]
        variants[name] = summarize(rows)
    results = {"traces": args.traces, "tokenizer": args.tokenizer, "chat_template": args.chat_template,
               "rendering": rendering.mode, "conversations": len(convs), "skipped": skipped,
               "gram": args.gram, "run": args.run, "variants": variants}
    emit(args, results, _table)
    return 0


def _table(r: dict) -> None:
    print(f"{r['conversations']} conversations ({r['skipped']} skipped), template of "
          f"{r['chat_template'] or r['tokenizer']} ({r['rendering']} rendering); displaced = runs >= {r['run']} tokens")
    print(f"{'variant':<9} {'turn':<6} {'calls':>6} {'prompt tok':>11} {'hit':>10} {'hit %':>6} {'new':>9} "
          f"{'displaced':>9} {'disp % new':>10}")
    for name, v in r["variants"].items():
        for t in ("all", *TYPES):
            s = v[t]
            print(f"{name:<9} {t:<6} {s['calls']:>6} {s['prompt_tokens']:>11} {s['hit_tokens']:>10} "
                  f"{100 * s['hit_rate']:>6.1f} {s['new_tokens']:>9} {s['displaced_tokens']:>9} "
                  f"{100 * s['displaced_share_of_new']:>10.1f}")
