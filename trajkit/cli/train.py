"""``trajkit train CONFIG [key=value ...]``: run the RL trainer (:mod:`trajkit.rl`) with a progress bar."""
from __future__ import annotations

import argparse
import os

from trajkit.cli.commands import COMMANDS

EXAMPLE = """examples:
  trajkit train rep                                   # a packaged config (trajkit/configs/rep.yaml)
  trajkit train grpo_smollm2                          # GRPO on SmolLM2-135M-Instruct (real model, offline)
  trajkit train sft_harbor_smollm2 seed=1             # SFT warm start on Harbor task kinds (trainer: sft)
  trajkit train grpo_smollm2 cluster.ray=true cluster.rollout_workers=2   # on Ray: 2 rollout + 1 policy worker
  trajkit train examples/rl_rep.yaml seed=1 draft.kind=none draft.distill=false steps=50 log.out_dir=runs/plain
  trajkit train rep checkpoint.resume_from=runs/rl_rep/checkpoints/step_000050
  torchrun --nproc_per_node 2 -m trajkit.cli.main train grpo_smollm2 policy.fsdp=true  # FSDP2 over 2 ranks
  trajkit train --print-config                        # every key with its default
  trajkit train grpo_smollm2 --print-config optim.lr=1e-6

CONFIG is a YAML file or the name of a packaged config; every key can be overridden with dotted
key=value pairs; unknown keys are errors. Tasks and rewards can be import paths:
  trajkit train rep task.name=my_pkg.tasks:make_task 'rewards=[my_pkg.rewards:exact]'
  trajkit train rep 'log.report_to=[tensorboard,wandb]'     # WANDB_MODE=offline: no network

Logs: OUT_DIR/metrics.jsonl (always), OUT_DIR/tensorboard/ and OUT_DIR/wandb/ (log.report_to), OUT_DIR/samples/,
OUT_DIR/checkpoints/step_N/ (policy/ loads with transformers' from_pretrained, trainer_state.pt to resume)."""


def register(sub) -> None:
    p = sub.add_parser("train", help=COMMANDS["train"],
                       description="Train a policy with a five-stage synchronous GRPO step.", epilog=EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", nargs="?", help="YAML config file or packaged config name (rep, grpo_smollm2, ...)")
    p.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. optim.lr=3e-4")
    p.add_argument("--print-config", action="store_true",
                   help="print every key of the resolved config (defaults marked) as YAML and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar; print one line per step")
    p.set_defaults(handler=cmd_train)


def _train_sft(cfg, print_config: bool) -> int:
    import dataclasses
    import json

    from trajkit.trainers.door import trainer_for

    if print_config:
        print(json.dumps(dataclasses.asdict(cfg), indent=1))
        return 0
    report = trainer_for(cfg)(cfg, log=lambda line: print(line, flush=True))
    base, sft = report.get("eval_base"), report.get("eval_sft")
    rate = lambda r: "-" if r is None else f"{r['pass_rate']:.3f} ± {r['stderr'] or 0:.3f}"  # noqa: E731
    print(f"held-out pass rate: base {rate(base)} -> sft {rate(sft)}; policy in {cfg.out_dir}/final; "
          f"report {cfg.out_dir}/report.json")
    return 0


def cmd_train(args) -> int:
    from trajkit.progress import progress_bar, quiet_transformers
    from trajkit.rl.config import packaged_configs
    from trajkit.trainers.door import load_training_config, trainer_for, trainer_kind

    quiet_transformers()
    config, overrides = args.config, list(args.overrides)
    if config is not None and "=" in config:  # `--print-config key=value` without a config file
        config, overrides = None, [config, *overrides]
    cfg = load_training_config(config, overrides)
    if trainer_kind(cfg) == "sft":  # `trainer: sft`: the supervised warm start (trajkit.trainers.sft)
        return _train_sft(cfg, args.print_config)
    if args.print_config:
        from trajkit.rl.config import describe

        print(describe(cfg), end="")
        return 0
    if config is None:
        raise SystemExit("trajkit train: give a CONFIG (a YAML file or a packaged config: "
                         f"{', '.join(sorted(packaged_configs()))}), or --print-config")
    if trainer_kind(cfg) == "fsdp" and os.environ.get("RANK", "0") != "0":  # a sharded run's other ranks: rank 0 reports
        cfg.log.quiet = True
    show_bar = not (args.no_progress or cfg.log.quiet)
    # A bar is drawn only on a terminal (piped, `2>&1 | cat`, it would print a line per refresh); the eval
    # lines and every 10th step are printed either way.
    bar = progress_bar(total=cfg.steps, desc="train", unit="step", enabled=show_bar)

    def progress(result) -> None:
        m = result.metrics
        if not show_bar:
            if not cfg.log.quiet:
                print(f"step {result.step}: reward {m['reward/raw']:.3f} | {result.timer.line()}", flush=True)
            return
        bar.update(result.step - bar.n)
        bar.set_postfix(reward=f"{m['reward/raw']:.3f}", step_s=f"{result.timer.total:.2f}",
                        gen=f"{100 * m['share/generation']:.0f}%", acc_len=f"{m['gen/acceptance_length']:.2f}")
        if "eval/reward" in m:
            bar.write(f"step {result.step}: eval reward {m['eval/reward']:.3f} | {result.timer.line()}")
        elif result.step % 10 == 0:
            bar.write(f"step {result.step}: reward {m['reward/raw']:.3f} | {result.timer.line()}")

    with bar:  # in process, this rank of a torchrun launch (rank 0 drives the step) or on Ray actors
        history = trainer_for(cfg)(cfg, progress)
    evals = [h["eval/reward"] for h in history if "eval/reward" in h]
    if evals and not cfg.log.quiet:
        print(f"eval reward: {evals[0]:.3f} -> {evals[-1]:.3f}; logs in {cfg.log.out_dir}")
    return 0
