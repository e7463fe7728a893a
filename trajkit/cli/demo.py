"""``trajkit demo``: the whole pipeline on bundled data (what ``make demo`` runs); ``trajkit demo agent``: the
agentic loop (tasks -> Oracle traces -> SFT -> RL -> held-out evals, with a report) for N seeds."""
from __future__ import annotations

from trajkit.cli.commands import COMMANDS

AGENT_EXAMPLE = """Examples:
  trajkit demo agent --seeds 0,1,2 --out runs/agent_loop
  trajkit demo agent --seeds 0 --out runs/agent_small --set sft.train_n=4 --set sft.steps=8 \\
    --set sft.families=match-sort-json,lines-sum-text,match-replace-json,lines-reverse-text \\
    --set rl.steps=2 --set rl.eval.every=1 --set rl.sampler.max_items=8
  (a short try, about 4 minutes on 2 cores: 2 trained kinds, 4 held-out tasks; a seed as
  packaged takes about 70 minutes, estimated from its timed parts)

Overrides: sft.KEY=VALUE goes to the SFT config (default sft_harbor_smollm2: trajkit train sft_harbor_smollm2
--print-config lists its keys), rl.SECTION.KEY=VALUE to the RL config (default grpo_harbor_smollm2). A rerun
with the same --out and overrides skips every finished stage of every seed. Writes OUT/report.md,
OUT/report.json and OUT/curves/*.png."""


def cmd_demo(args) -> int:
    from trajkit.demo import run_demo

    run_demo(args.out, args.stage)
    return 0


def cmd_agent(args) -> int:
    from trajkit.demo_agent import LoopConfig, parse_seeds, run_loop

    cfg = LoopConfig(seeds=parse_seeds(args.seeds), out=args.out, sft=args.sft, rl=args.rl,
                     overrides=args.set or [])
    report = run_loop(cfg)
    print(f"report: {args.out}/report.md (and report.json, curves/*.png); "
          f"held-out pass rate base -> SFT -> RL (mean over seeds): "
          + " -> ".join(f"{report['mean'][arm]['all']['pass_rate']:.3f}" if report["mean"][arm]["all"] else "-"
                        for arm in ("base", "sft", "rl")))
    return 0


def register(sub) -> None:
    import argparse

    from trajkit.demo import STAGES
    from trajkit.demo_agent import LoopConfig

    p = sub.add_parser("demo", help=COMMANDS["demo"],
                       description="Run the end-to-end demo on bundled data; nothing is downloaded. "
                                   "`trajkit demo agent` runs the agentic loop instead.",
                       epilog="Example: trajkit demo --out trajkit-demo --stage traces; trajkit demo agent --help")
    p.add_argument("--out", default="trajkit-demo", help="output folder (default: trajkit-demo)")
    p.add_argument("--stage", action="append", choices=list(STAGES), help="run only this stage (repeatable)")
    p.set_defaults(handler=cmd_demo)
    demos = p.add_subparsers(dest="demo", metavar="{agent}")
    a = demos.add_parser("agent", help="the agentic loop: tasks, Oracle traces, SFT, GRPO, held-out evals, report",
                         description="The whole agentic loop for each seed: task kinds (train / held-out), Oracle "
                                     "traces, SFT, GRPO from the SFT policy, held-out eval of base, SFT and RL; then "
                                     "a report with pass rates, curves, trace stats and audit verdicts. The packaged "
                                     "configs generate the composed kinds and draw RL tasks by the policy's pass "
                                     "rate (rollout.sampler=difficulty).",
                         epilog=AGENT_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = LoopConfig()  # the defaults are the config's, declared once
    a.add_argument("--seeds", default=",".join(map(str, d.seeds)), help=f"comma-separated seeds (default {','.join(map(str, d.seeds))})")
    a.add_argument("--out", default=d.out, help=f"output folder (default: {d.out})")
    a.add_argument("--sft", default=d.sft, help=f"the SFT config, packaged name or YAML file (default {d.sft})")
    a.add_argument("--rl", default=d.rl, help=f"the RL config, packaged name or YAML file (default {d.rl})")
    a.add_argument("--set", action="append", metavar="sft.KEY=V|rl.KEY=V",
                   help="override a key of the SFT or RL config (repeatable)")
    a.set_defaults(handler=cmd_agent)
