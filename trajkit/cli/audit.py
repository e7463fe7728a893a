"""``trajkit audit …``: data (train/eval leaks), seeds (is a gain more than seed noise), labels (what a
token export trains), tokenizers (component diff and drift),
rewards (null probes of a config's reward functions), run (reward divergence, log-prob mismatch).

Thin: flags (from the checks' config dataclasses) -> :mod:`trajkit.audit` -> a verdict table or JSON.
Exit 0 when no check fails, 1 when one does, 2 for unusable input. Nothing heavy is imported until a
command runs.
"""
from __future__ import annotations

import argparse

from trajkit.cli.commands import COMMANDS
from trajkit.config import add_arguments, from_args

DATA_EPILOG = """Example:
  trajkit audit data --train sft.jsonl --eval eval.jsonl --json
  trajkit audit data --train train.jsonl --run runs/my_run     # the run's own eval items, full vs clean metric

Rows: Hermes ShareGPT (conversations), OpenAI chat (messages), prompt datasets (prompt/question + answer),
or token exports (input_ids + labels, with --tokenizer: user turns as the prompt, trained tokens as the answer).
Checks: leak.exact (normalised hash), leak.ngram (13-gram, 8 for short items; FAIL when the answer is
covered), leak.near (5-word-shingle Jaccard >= 0.8 by MinHash, confirmed exactly); with --run,
leak.clean_metric (the run's metric on all eval items and on the clean ones, from its eval_items.jsonl;
FAIL when they differ by more than 2 standard errors). Exit 1 when a check fails, 2 for unreadable input.
Method and sources: docs/audit.md."""

SEEDS_EPILOG = """Examples:
  trajkit audit seeds --baseline runs/base_s0 runs/base_s1 runs/base_s2 --candidate runs/new_s0 runs/new_s1 runs/new_s2
  trajkit audit seeds --baseline bench-out/train.json:plain --candidate bench-out/train.json:spec --json

RUN: a trajkit train folder (metrics.jsonl + config.yaml) or FILE.json:ARM of trajkit bench train.
Per seed: mean of the last k evaluations; IQM difference with a stratified bootstrap CI, probability of
improvement, Welch's t, leave-one-seed-out, minimum detectable effect. Fewer than 3 seeds: refused (exit 1)."""


LABELS_EPILOG = """Example:
  trajkit audit labels sft-tokens.parquet --tokenizer ./tok --json

Rows: input_ids + labels (-100 = not trained), as trajkit traces export --format tokens writes them.
Checks: labels.alignment (labels[i] == input_ids[i]; a pre-shifted row is a double shift), labels.roles
(with --tokenizer: trained tokens in system/user/tool turns FAIL, untrained assistant turns WARN),
labels.empty, labels.duplicates."""


TOKENIZERS_EPILOG = """Example:
  trajkit audit tokenizers export/tok trainer/tok engine/tok --samples sft-tokens.parquet
  trajkit audit tokenizers engine/tok --records save/records.jsonl --trained train-samples.jsonl

Fingerprints of vocab, merges, normaliser, pre-tokeniser, added and special tokens with ids, chat
template, eos ids, BOS policy and decoder; each folder compared with the first, component by component
(FAIL on a difference, naming it). --samples: token export rows whose ids change in encode(decode(ids)).
--records + --trained: trained samples whose ids are not the ones the gateway recorded at generation
(FAIL; "re-encoded from text" when they equal encode(decode(generated ids)) under the first tokenizer)."""


REWARDS_EPILOG = """Examples:
  trajkit audit rewards rep
  trajkit audit rewards my_config.yaml rewards=[my_pkg.rewards:fmt,my_pkg.rewards:correct] --prompts 16

Builds the config's task and its reward functions (the ones trajkit train would use) and scores null
completions on the first N train and eval prompts: empty, an echo of the prompt, format-only skeletons
(<think></think>, \\boxed{}, <answer></answer>, an empty tool call). Any function paying any of them: FAIL."""

RUN_EPILOG = """Examples:
  trajkit audit run runs/rl_rep --window 5
  trajkit audit run bench-out/train.json:plain bench-out/train.json:random

Per run folder (metrics.jsonl), or per seed of a trajkit bench train result FILE.json:ARM: run.rows (dataset runs: a row drawn twice in an epoch, or never: FAIL),
run.reward_divergence (Kendall τ of train reward/raw and of the held-out
metric over the last evaluations: train rising while held-out falls is a WARN, a FAIL when both trends are
significant) and run.mismatch (exp(mismatch/mean_abs) > 1.05, a lower bound of NeMo RL's
token_mult_prob_error, or an alarm step: FAIL; a rising trend: WARN)."""


def _emit(report, args) -> int:
    print(report.to_json() if args.json else report.table())
    return report.exit_code


def cmd_data(args) -> int:
    from trajkit.audit.config import LeakConfig
    from trajkit.audit.leaks import audit_data

    return _emit(audit_data(args.train, args.eval, from_args(LeakConfig, args), args.tokenizer, args.run), args)


def cmd_seeds(args) -> int:
    from trajkit.audit.config import SeedConfig
    from trajkit.audit.seeds import audit_seeds

    return _emit(audit_seeds(args.baseline, args.candidate, from_args(SeedConfig, args), args.control), args)


def cmd_labels(args) -> int:
    from trajkit.audit.labels import audit_labels

    return _emit(audit_labels(args.paths, args.tokenizer), args)


def cmd_tokenizers(args) -> int:
    from trajkit.audit.tokenizers import audit_tokenizers

    return _emit(audit_tokenizers(args.folders, args.samples, args.records, args.trained), args)


def cmd_rewards(args) -> int:
    from trajkit.audit.report import AuditReport
    from trajkit.audit.rewards import null_probe_check, probe_prompt
    from trajkit.rl.build import build_tokenizer
    from trajkit.rl.config import load_config
    from trajkit.envs.registry import make_task
    from trajkit.rl.trainer import make_rewards

    cfg = load_config(args.config, list(args.overrides))
    tokenizer = build_tokenizer(cfg)
    task = make_task(cfg.task, cfg.seed, tokenizer)
    prompts = [probe_prompt(f"{split} prompt {i}", task.prompt(i, split=split))
               for split in ("train", "eval") for i in range(args.prompts)]
    check = null_probe_check(make_rewards(task, cfg), prompts,
                             lambda text: tokenizer.encode(text, add_special_tokens=False))
    return _emit(AuditReport([check]), args)


def cmd_run(args) -> int:
    from trajkit.audit.report import AuditReport
    from trajkit.audit.rewards import run_checks

    return _emit(AuditReport(run_checks(args.runs, args.metric, args.window)), args)


def register(subparsers) -> None:
    from trajkit.audit.config import LeakConfig, SeedConfig

    p = subparsers.add_parser("audit", help=COMMANDS["audit"],
                              description="Checks with a statistic, a threshold and a verdict (PASS/WARN/FAIL). "
                                          "Example: trajkit audit data --train sft.jsonl --eval eval.jsonl")
    sub = p.add_subparsers(dest="audit_command", metavar="CHECK")
    raw = argparse.RawDescriptionHelpFormatter
    d = sub.add_parser("data", help="eval items found in train data (exact, 13-gram, near-duplicate)",
                       description="Leaks of eval items into train data.", epilog=DATA_EPILOG, formatter_class=raw)
    d.add_argument("--train", nargs="+", required=True, metavar="FILE", help="train data files")
    d.add_argument("--eval", nargs="+", metavar="FILE", help="eval data files (default with --run: the run's eval items)")
    d.add_argument("--run", metavar="RUN", help="a trajkit train run folder (eval_items.jsonl): its metric "
                                                "re-computed without the leaked eval items")
    d.add_argument("--tokenizer", metavar="DIR", help="tokenizer of token export rows (input_ids + labels)")
    d.add_argument("--json", action="store_true", help='print {"checks": [...]} instead of the table')
    add_arguments(d, LeakConfig)
    d.set_defaults(handler=cmd_data)
    s = sub.add_parser("seeds", help="is a candidate's gain over a baseline more than seed noise",
                       description="Seed statistics of a claimed gain.", epilog=SEEDS_EPILOG, formatter_class=raw)
    s.add_argument("--baseline", nargs="+", required=True, metavar="RUN", help="baseline runs, one per seed")
    s.add_argument("--candidate", nargs="+", required=True, metavar="RUN", help="candidate runs, one per seed")
    s.add_argument("--control", nargs="+", default=None, metavar="RUN",
                   help="random-reward control runs: the candidate must beat them too")
    s.add_argument("--json", action="store_true", help='print {"checks": [...]} instead of the table')
    add_arguments(s, SeedConfig)
    s.set_defaults(handler=cmd_seeds)
    lab = sub.add_parser("labels", help="what a token export trains: roles, label shift, empty and repeated rows",
                         description="Label checks of a token export.", epilog=LABELS_EPILOG, formatter_class=raw)
    lab.add_argument("paths", nargs="+", metavar="FILE", help="token export files (.jsonl, .parquet)")
    lab.add_argument("--tokenizer", metavar="DIR", help="the export's tokenizer folder (enables labels.roles)")
    lab.add_argument("--json", action="store_true", help='print {"checks": [...]} instead of the table')
    lab.set_defaults(handler=cmd_labels)
    t = sub.add_parser("tokenizers", help="do these tokenizer folders tokenize alike (component diff, drift)",
                       description="Tokenizer fingerprints and component diff.", epilog=TOKENIZERS_EPILOG,
                       formatter_class=raw)
    t.add_argument("folders", nargs="+", metavar="DIR", help="tokenizer folders; the first is the reference")
    t.add_argument("--samples", nargs="+", metavar="FILE", help="token export rows for the retokenization drift")
    t.add_argument("--records", metavar="FILE", help="the gateway's records.jsonl (ids at generation), with --trained")
    t.add_argument("--trained", nargs="+", metavar="FILE",
                   help="samples trained on (prompt_ids, completion_ids, loss_mask, metadata.session/calls)")
    t.add_argument("--json", action="store_true", help='print {"checks": [...]} instead of the table')
    t.set_defaults(handler=cmd_tokenizers)
    rw = sub.add_parser("rewards", help="do the task's rewards pay empty, echoed or format-only answers",
                        description="Null probes of a training config's reward functions.", epilog=REWARDS_EPILOG,
                        formatter_class=raw)
    rw.add_argument("config", help="training config: a YAML file or a packaged config name (rep, grpo_smollm2)")
    rw.add_argument("overrides", nargs="*", help="key=value config overrides, e.g. rewards=[pkg.mod:func]")
    rw.add_argument("--prompts", type=int, default=8, help="train and eval prompts to probe, each (default: 8)")
    rw.add_argument("--json", action="store_true", help='print {"checks": [...]} instead of the table')
    rw.set_defaults(handler=cmd_rewards)
    r = sub.add_parser("run", help="rows fed per epoch, train reward vs held-out trend, log-prob mismatch of runs",
                       description="Reward divergence and mismatch history of runs.", epilog=RUN_EPILOG,
                       formatter_class=raw)
    r.add_argument("runs", nargs="+", metavar="RUN", help="trajkit train run folders or bench results FILE.json:ARM")
    r.add_argument("--metric", default="eval/reward", help="the held-out metric (default: eval/reward)")
    r.add_argument("--window", type=int, default=5, help="last evaluations to take the trend over (default: 5)")
    r.add_argument("--json", action="store_true", help='print {"checks": [...]} instead of the table')
    r.set_defaults(handler=cmd_run)
