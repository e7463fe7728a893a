"""``trajkit traces export``: SFT data as OpenAI messages (format openai) or token ids + labels (tokens)."""
from __future__ import annotations

import json
import sys

from trajkit.config import add_arguments, from_args


def _traces(args, counter):
    from trajkit.cli.traces import warn_skipped
    from trajkit.traces.load import iter_traces

    def on_error(exc):
        counter["skipped_rows"] += 1
        warn_skipped(exc)

    return _require_rows(iter_traces(args.paths, strict=args.strict, on_error=on_error), args.paths, counter)


def _require_rows(traces, paths, counter):
    """The traces, then :class:`InputError` when there were none: raised while the output is still being
    written, so it is discarded and an older file under that name stays."""
    from trajkit.traces.load import no_rows_error

    n = 0
    for trace in traces:
        n += 1
        yield trace
    if not n:
        raise no_rows_error(paths, counter["skipped_rows"])


def _export_openai(args, traces, skipped_rows) -> dict:
    from trajkit.traces.export.sft import export_openai

    report = export_openai(traces, args.out, system=args.system, malformed=args.malformed, progress=not args.quiet,
                           strict=args.strict)
    report.skipped_rows = skipped_rows["skipped_rows"]
    return report.as_dict()


def _export_tokens(args, traces, skipped_rows) -> dict:
    import dataclasses

    from trajkit.errors import ConfigError
    from trajkit.traces.export.token_export import export_trace_tokens
    from trajkit.traces.export.tokenize import TokenizeConfig

    if not args.tokenizer:
        raise ConfigError("--format tokens needs --tokenizer DIR (a local Hugging Face tokenizer with a chat "
                          "template; `trajkit demo --stage traces` builds a small one in trajkit-demo/tokenizer)")
    from trajkit.models.load import local_folder

    tokenizer = local_folder(args.tokenizer)
    config = from_args(TokenizeConfig, args)
    _check_window(tokenizer, config.max_length, args)
    summary, counts = export_trace_tokens(traces, tokenizer, config, args.out, system=args.system,
                                          malformed=args.malformed, strict=args.strict, progress=not args.quiet,
                                          workers=args.workers)
    out = dataclasses.asdict(summary)
    out["traces"] = counts.traces
    out["skipped_malformed"] = counts.skipped_malformed
    out["skipped_rows"] = skipped_rows["skipped_rows"]
    return out


def _check_window(folder: str, max_length: int, args) -> None:
    """``--max-length`` within the model's window (its ``config.json``, scaled by ``--rope-*``), when the
    tokenizer folder is a model folder: examples past it could not be trained on."""
    import math

    from trajkit.errors import ConfigError
    from trajkit.models.rope import RopeScaling, folder_window

    scaling = from_args(RopeScaling, args, prefix="rope_")
    window = folder_window(folder, scaling)
    if window is None or max_length <= window:
        return
    plain = folder_window(folder)
    factor = math.ceil(max_length / plain)
    how = f" with YaRN x{scaling.factor:g}" if scaling.active else ""
    raise ConfigError(f"--max-length {max_length} is past the model's {window} positions ({folder}/config.json"
                      f"{how}); lower --max-length to {window}, or extend the window with YaRN: --rope-type yarn "
                      f"--rope-factor {factor} here, and policy.rope_scaling.type=yarn "
                      f"policy.rope_scaling.factor={factor} in training")


def cmd_export(args) -> int:
    from trajkit.cli.traces import summary_stream
    from trajkit.atomic import refuse_same_file

    refuse_same_file([args.out], args.paths)
    counter = {"skipped_rows": 0}
    traces = _traces(args, counter)
    result = (_export_openai if args.format == "openai" else _export_tokens)(args, traces, counter)
    out = summary_stream(args)
    if args.json:
        print(json.dumps(result, indent=2), file=out)
    else:
        shown = {k: v for k, v in result.items() if not isinstance(v, (list, dict))}
        print(f"exported {args.format} -> {args.out}: " + ", ".join(f"{k}={v}" for k, v in shown.items()),
              file=out)
        if result.get("template"):
            print("rendering: " + result["template"]["rendering"]["reason"], file=out)
        for reason in result.get("dropped", [])[:5]:
            print(f"dropped: {reason}", file=sys.stderr)
    return 0


def cmd_template_info(args) -> int:
    from trajkit.traces.export.template_probe import choose_rendering, format_info, probe_template
    from trajkit.traces.export.token_export import load_tokenizer

    info = probe_template(load_tokenizer(args.tokenizer))
    rendering = choose_rendering(info, args.render_mode)
    if args.json:
        print(json.dumps({"probe": info.as_dict(), "rendering": rendering.__dict__}, indent=2))
    else:
        print(format_info(info, rendering))
    return 0


def register(tsub, add_common) -> None:
    from trajkit.models.rope import RopeScaling
    from trajkit.traces.export.tokenize import TokenizeConfig

    info = tsub.add_parser("template-info", help="what a tokenizer's chat template renders, and how export uses it",
                           description="Probe a chat template with a small conversation: which fields survive "
                                       "(tools, tool calls, tool results, reasoning, system), whether it rewrites "
                                       "history, and the rendering the token export will use.",
                           epilog="Example: trajkit traces template-info --tokenizer ./smollm2-tokenizer --json")
    info.add_argument("--tokenizer", required=True, help="local tokenizer folder with a chat template")
    info.add_argument("--render-mode", default="auto", choices=["auto", "structured", "inline"],
                      help="show the choice for this mode (default: auto)")
    info.add_argument("--json", action="store_true", help="print the findings as JSON")
    info.set_defaults(handler=cmd_template_info)

    p = tsub.add_parser("export", help="export SFT data: OpenAI messages or token ids + assistant-only labels",
                        description="Export traces as SFT data. Every token example passes a mask check: "
                                    "its unmasked tokens decode exactly to the assistant turns.",
                        epilog="Examples: trajkit traces export kimi.jsonl --format openai --out sft.jsonl\n"
                               "  trajkit traces export kimi.jsonl --format tokens --tokenizer ./tok "
                               "--max-length 8192 --think-policy drop --out sft.parquet\n"
                               "  trajkit traces export kimi.jsonl --format tokens --tokenizer ./smollm2 "
                               "--max-length 32768 --rope-type yarn --rope-factor 4 --out long.parquet")
    add_common(p)
    p.add_argument("--format", required=True, choices=["openai", "tokens"], help="what to write")
    p.add_argument("--out", required=True, help="output: .jsonl/.jsonl.gz/.parquet or - for stdout (openai), "
                                                ".parquet/.jsonl (tokens)")
    p.add_argument("--tokenizer", help="local tokenizer folder with a chat template (tokens format)")
    p.add_argument("--system", default="auto", choices=["auto", "keep", "drop"],
                   help="system messages: auto drops one holding the <tools> block (tools travel separately)")
    p.add_argument("--malformed", default="skip", choices=["skip", "as_text", "error"],
                   help="traces with malformed tool calls: skip (counted), keep the raw block as text, or stop")
    p.add_argument("--workers", type=int, default=1, help="tokenizer processes (tokens format)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_arguments(p, TokenizeConfig)
    add_arguments(p, RopeScaling, prefix="rope_")  # the window --max-length is checked against (tokens format)
    p.set_defaults(handler=cmd_export)
