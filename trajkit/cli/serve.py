"""``trajkit serve``: the OpenAI-compatible token-in/token-out gateway over a local model (trajkit.gateway), or
with ``--api tinker`` a Tinker-compatible training server (trajkit.tinker: LoRA training clients over the
model, sampling with trajkit's engine, tinker:// checkpoints under --checkpoint-dir)."""
from __future__ import annotations

import sys

from trajkit.cli.commands import COMMANDS
from trajkit.config import add_arguments, from_args

EXAMPLE = """Examples:
  trajkit serve --model ./my-model --port 8000
  trajkit serve --model ./my-model --drafter ngram --k 3 --save-dir runs/gw
  trajkit serve --model ./my-model --draft ./my-draft --model-name policy --reported-context-length 131072
  trajkit serve --model ./my-model --rope-type yarn --rope-factor 4      (YaRN: 4x the model's window)
  trajkit serve --model ./my-model --backend vllm --drafter ngram    (vLLM in its venv: make vllm-venv)
then: OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="SESSION").chat.completions.create(model="trajkit", ...)
  trajkit serve --model ./my-model --api-key KEY      (every caller needs the key; sessions by x-session-id)
  trajkit serve --api tinker --model ./my-model --model-name ./my-model --checkpoint-dir runs/tinker
then: tinker.ServiceClient(base_url="http://127.0.0.1:8000", api_key="tml-local")
        .create_lora_training_client(base_model="./my-model", rank=32)"""


def cmd_serve(args) -> int:
    if args.api == "tinker":
        return _serve_tinker(args)
    from trajkit.gateway.server import serve

    log = None
    if args.save_dir:
        from trajkit.gateway.persist import SessionLog

        log = SessionLog(args.save_dir)  # refuses a directory holding an earlier run's records, before loading
    gateway = _gateway(args)
    if log is not None:
        gateway.on_record.append(log.append)
    if args.api_key:
        from trajkit.gateway.access import Access

        gateway.access = Access(gateway.sessions, api_key=args.api_key)
    print(f"trajkit serve: {args.model} as {gateway.config.model_name} on "
          f"http://{gateway.config.host}:{gateway.config.port}/v1 ({gateway.renderer.rendering.mode} rendering)"
          + (f"; each call appended to {log.path}" if log else ""), file=sys.stderr)
    print(f"trajkit serve: tool-call format {gateway.format.name} ({gateway.format_note}); "
          f"{gateway.stops.describe(gateway.tokenizer)}", file=sys.stderr)
    try:
        serve(gateway)
    finally:
        if log is not None:
            n = log.close(gateway.sessions.all())
            print(f"trajkit serve: {log.calls} call(s) of {n} session(s) in {args.save_dir}", file=sys.stderr)
    return 0


def _gateway(args):
    """The gateway of ``trajkit serve``'s flags over the backend the one builder makes of them."""
    from trajkit.backends.build import spec_from_args
    from trajkit.gateway.config import GatewayConfig
    from trajkit.gateway.server import load_gateway
    from trajkit.models.rope import RopeScaling
    from trajkit.recipes.cache import vllm_python

    spec = spec_from_args(args, rope_scaling=from_args(RopeScaling, args, prefix="rope_"), python=vllm_python())
    return load_gateway(args.model, from_args(GatewayConfig, args), spec=spec)


def _serve_tinker(args) -> int:
    from trajkit.errors import ConfigError
    from trajkit.tinker.server import load_service, serve

    if args.backend != "trajkit" or args.draft or args.drafter:
        raise ConfigError("--api tinker samples with trajkit's engine without a drafter; drop --backend, --draft "
                          "and --drafter")
    from trajkit.gateway.config import GatewayConfig

    cfg = from_args(GatewayConfig, args)  # --host, --port and --model-name, with the gateway's defaults
    service = load_service(args.model, cfg.model_name, args.checkpoint_dir)
    print(f"trajkit serve: base model {service.model_name!r} ({args.model}); checkpoints under "
          f"{args.checkpoint_dir}", file=sys.stderr)
    serve(service, cfg.host, cfg.port)
    return 0


def register(sub) -> None:
    from trajkit.backends.build import add_arguments as add_backend_arguments
    from trajkit.gateway.config import GatewayConfig
    from trajkit.models.rope import RopeScaling

    p = sub.add_parser("serve", help=COMMANDS["serve"],
                       description=__doc__, epilog=EXAMPLE, formatter_class=_raw())
    p.add_argument("--api", choices=("openai", "tinker"), default="openai",
                   help="openai: the OpenAI-compatible gateway (default); tinker: the Tinker training API")
    p.add_argument("--model", required=True, help="local Hugging Face model folder (tokenizer beside it)")
    p.add_argument("--checkpoint-dir", default="runs/tinker",
                   help="--api tinker: where tinker:// checkpoints are kept (default: runs/tinker)")
    add_backend_arguments(p)  # --backend, --draft, --drafter, --k: the one backend builder's flags
    p.add_argument("--api-key", default=None,
                   help="require Authorization: Bearer KEY on every route but /health (the session is then "
                        "x-session-id); default: open to every caller that reaches the port")
    p.add_argument("--save-dir", default=None, help="append each call to records.jsonl here as it finishes; on exit (SIGINT, SIGTERM) add samples.jsonl and hermes.jsonl")
    add_arguments(p, GatewayConfig)
    add_arguments(p, RopeScaling, prefix="rope_")
    p.set_defaults(handler=cmd_serve)


def _raw():
    import argparse

    return argparse.RawDescriptionHelpFormatter
