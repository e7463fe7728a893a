"""``trajkit generate``: sample completions with trajkit's engine (plain or speculative).

The model is a local Hugging Face folder (``--model``), or the shipped tiny target/draft pair (built and
cached on first use; ``--build-tiny`` only builds it). Prompts are text (tokenised with the folder's
tokenizer) or raw token ids. ``--draft DIR`` is read by its kind's own loader (a draft model, a window
drafter, or an EAGLE head over ``--model``'s hidden states: ``--drafter eagle``, which is also the default
for a folder holding ``eagle.json``); ``--drafter eagle`` with the prepared SmolLM2 model and no ``--draft``
uses its cached head (``trajkit models prepare smollm2-135m-instruct-eagle``).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from trajkit.cli.commands import COMMANDS
from trajkit.config import add_arguments, from_args
from trajkit.errors import ConfigError

EXAMPLE = """Examples:
  trajkit generate --build-tiny                      # train + cache the tiny pair (a few minutes)
  trajkit generate --prompt 'Let me check the file' --k 3 --max-new-tokens 64 --seed 0
  trajkit generate --model ./my-model --draft ./my-draft --k auto --prompt 'def main():' --json
  trajkit generate --model ~/.cache/trajkit/smollm2-135m-instruct/model --drafter eagle --k 2 \
      --prompt 'Explain recursion.' --temperature 0        # the prepared EAGLE head (models prepare ...-eagle)
  trajkit generate --model ./my-model --draft ./my-eagle-head --prompt 'Hi'   # a head folder: --drafter eagle
  trajkit generate --model ./my-model --drafter ngram --prompt-ids 1,2,3 --temperature 0"""


def cmd_generate(args) -> int:
    from trajkit.recipes.tiny_pair import TinyPairConfig, load_tiny_pair

    if args.build_tiny:
        pair = load_tiny_pair(TinyPairConfig(seed=args.tiny_seed), cache=args.cache_dir,
                              log=lambda m: print(m, file=sys.stderr))
        print(pair.path)
        return 0
    target, own_draft, tok = _load_models(args)
    backend = _backend(args, target, own_draft)
    prompts = _prompts(args, tok)
    from trajkit.engine import SamplingParams

    stop = args.stop_id if args.stop_id is not None else ([tok.eos_token_id] if tok and tok.eos_token_id
                                                          is not None else [])
    params = from_args(SamplingParams, args, stop_token_ids=stop)
    try:
        out = backend.generate([p for p in prompts for _ in range(args.n)], params)
    finally:
        backend.close()
    _print(out, args, tok)
    return 0


def _load_models(args):
    """-> (target or None, the tiny pair's own draft or None, tokenizer or None); with ``--model`` the
    backend builder loads the target (or vLLM does)."""
    if args.model is None:
        from trajkit.recipes.tiny_pair import TinyPairConfig, load_tiny_pair

        pair = load_tiny_pair(TinyPairConfig(seed=args.tiny_seed), cache=args.cache_dir,
                              log=lambda m: print(m, file=sys.stderr))
        return pair.target, pair.draft, _tokenizer(pair.path / "target")
    return None, None, _tokenizer(args.model)


def _tokenizer(folder):
    from trajkit.models.load import load_tokenizer

    return load_tokenizer(folder, required=False)


def _backend(args, target=None, own_draft=None):
    """The backend of ``--backend``/``--model``/``--drafter``/``--draft``/``--k`` from the one builder
    (:func:`trajkit.backends.build.build_backend`): the kind's own loader reads ``--draft``; the tiny pair's
    own draft serves a ``model`` drafter; ``--drafter eagle`` without ``--draft`` on the prepared SmolLM2 is
    its cached head."""
    from trajkit.backends.build import build_backend, spec_from_args
    from trajkit.recipes.cache import vllm_python

    spec = spec_from_args(args, python=vllm_python())
    if args.drafter == "eagle" and not args.draft:
        spec = replace(spec, draft=_prepared_head(args))
    draft = own_draft if spec.drafter in (None, "model") else None  # the tiny pair's draft is a draft model
    return build_backend(spec, target=target, draft=draft)


def _prepared_head(args) -> str:
    """``--drafter eagle`` without ``--draft``: the prepared SmolLM2 head, when ``--model`` is the prepared
    SmolLM2 folder and the head is already cached (never trained here: that takes minutes)."""
    from pathlib import Path

    from trajkit.recipes.cache import cache_dir
    from trajkit.recipes.prepared import EAGLE_NAME
    from trajkit.recipes.smollm2 import NAME
    from trajkit.recipes.smollm2_eagle import eagle_folder, is_built

    root = Path(args.cache_dir) if args.cache_dir else cache_dir()
    if args.model is None or Path(args.model).resolve() != (root / NAME / "model").resolve():
        raise ConfigError("--drafter eagle needs --draft DIR, an EAGLE head folder (eagle.pt + eagle.json) trained "
                          f"on --model's target (the tiny pair has none; for {NAME}, prepared in {root / NAME}, "
                          f"the default is `trajkit models prepare {EAGLE_NAME}`)")
    folder = eagle_folder(root=root)
    if not is_built(folder):
        raise ConfigError(f"--drafter eagle: the {NAME} head is not built yet ({folder}); run `trajkit models "
                          f"prepare {EAGLE_NAME}` (minutes on a CPU) or pass --draft DIR")
    return str(folder)


def _prompts(args, tok) -> list[list[int]]:
    prompts = [[_int(t, "--prompt-ids") for t in p.split(",") if t.strip()] for p in args.prompt_ids or []]
    for text in args.prompt or []:
        if tok is None:
            raise ConfigError("--prompt needs a tokenizer in the model folder; pass --prompt-ids instead")
        prompts.append(tok(text, add_special_tokens=False)["input_ids"])
    if not prompts:
        raise ConfigError("give at least one --prompt TEXT or --prompt-ids 1,2,3")
    return prompts


def _int(text: str, flag: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{flag} expects an integer, got {text!r}") from None


def _print(out, args, tok) -> None:
    stats = out.stats.to_dict()
    for i, c in enumerate(out):
        text = tok.decode(c.token_ids) if tok is not None else None
        if args.json:
            print(json.dumps({"prompt": i // args.n, "token_ids": c.token_ids, "text": text,
                              "logprobs": c.logprobs, "finish_reason": c.finish_reason}))
        else:
            print(f"--- prompt {i // args.n} sample {i % args.n} ({c.finish_reason}, {len(c.token_ids)} tokens)")
            print(text if text is not None else c.token_ids)
    summary = {k: stats[k] for k in ("num_draft_tokens", "new_tokens", "target_calls", "proposed", "accepted",
                                     "acceptance_rate", "mean_acceptance_length", "alpha", "tokens_per_second")}
    print(json.dumps({"stats": summary}) if args.json else "stats: " + json.dumps(summary),
          file=sys.stdout if args.json else sys.stderr)


def register(sub) -> None:
    from trajkit.backends.build import add_arguments as add_backend_arguments
    from trajkit.engine import SamplingParams

    p = sub.add_parser("generate", help=COMMANDS["generate"],
                       description="Generate with trajkit's engine (or vLLM: --backend vllm) from a local "
                                   "model folder or the shipped tiny pair.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="local Hugging Face causal LM folder (default: the shipped tiny target)")
    add_backend_arguments(p, draft_help="draft folder: a draft model sharing the tokenizer, a window drafter or an "
                                        "EAGLE head (eagle.pt + eagle.json, trained on --model); its files tell "
                                        "the kind (default: the tiny pair's draft; with --drafter eagle and the "
                                        "prepared SmolLM2 model, its cached head)",
                          drafter_help="drafter kind (default: model if a draft is available, else none)")
    p.add_argument("--prompt", action="append", help="prompt text (repeatable)")
    p.add_argument("--prompt-ids", action="append", help="prompt token ids, comma-separated (repeatable)")
    p.add_argument("--n", type=int, default=1, help="samples per prompt (default: 1)")
    p.add_argument("--stop-id", type=int, action="append", help="stop token id (repeatable; default: the "
                                                                "tokenizer's eos)")
    add_arguments(p, SamplingParams)
    p.add_argument("--json", action="store_true", help="one JSON object per completion, then the stats")
    p.add_argument("--build-tiny", action="store_true", help="build (or find) the tiny pair, print its folder")
    p.add_argument("--tiny-seed", type=int, default=0, help="seed of the tiny pair (default: 0)")
    p.add_argument("--cache-dir", help="tiny-pair cache (default: $TRAJKIT_CACHE or ~/.cache/trajkit)")
    p.set_defaults(handler=cmd_generate)
