"""``trajkit envs …``: Harbor-format environments. ``check``: static checks, then the Oracle and NOP agents in
fresh sandboxes; a table (or ``--json``); exit 1 when any task fails, 2 for unusable input. ``compile``: tasks
from an Agent Skill with a model, kept when they pass the same checks."""
from __future__ import annotations

import argparse
import json

from trajkit.cli.commands import COMMANDS

CHECK_EPILOG = """Examples:
  trajkit envs check trajkit/envs/tasks               # every shipped task: Oracle 1, NOP 0
  trajkit envs check my-tasks/ --json --strict        # JSON rows; stop at the first task that does not load
  trajkit envs check my-tasks/ --adversarial          # and the hack agents: is any verifier fooled?
  trajkit envs clean                                  # remove sandboxes a killed trainer left

DIR is a Harbor task folder (instruction.md, task.toml, tests/test.sh, solution/solve.sh, environment/) or a
folder of them. Verdicts: ok, invalid, no solution, reward outside /logs/verifier, timeout, needs network,
no reward, oracle error, wrong solution, vacuous test, hackable: PROBE (docs/envs.md). The default sandbox needs root and no
daemon (namespaces + overlayfs + chroot); --sandbox docker needs a running Docker daemon."""


OPENENV_EPILOG = """
OpenEnv environments (--openenv pkg.module:Class in process, or ws://127.0.0.1:PORT a local server):
  trajkit envs check --openenv trajkit.envs.openenv.examples:GuessEnv \\
      --reference trajkit.envs.openenv.examples:guess_solver --adversarial
The reference policy ((messages) -> reply) must earn >= --pass-reward on every seed, the NOP (empty reply) 0;
with --adversarial the probes echo, shotgun, claim and overlong must earn 0. Verdicts: ok, env error, wrong
solution, vacuous, hackable: PROBE.

verifiers tasksets (--verifiers TASKSET_ID, a verifiers.v1 taskset run in the verifiers venv: make verifiers-venv):
  trajkit envs check --verifiers vf-sum --reference trajkit.envs.verifiers.examples:sum_solver --adversarial
Each task 0..--episodes-1 is a verifiers episode (null harness, subprocess runtime) whose model is the policy;
--path DIR adds a folder to the verifiers venv's import path, --env-config JSON sets the taskset's config fields.
The same rule, probes and verdicts as --openenv."""


def cmd_check(args) -> int:
    if args.openenv:
        return _check_openenv(args)
    if args.verifiers:
        return _check_verifiers(args)
    if not args.dir:
        raise SystemExit("trajkit envs check: give DIR (Harbor tasks), --openenv ENV or --verifiers TASKSET "
                         "(see --help)")
    from trajkit.envs.harbor.check import check_tasks, table, to_json

    rows = check_tasks(args.dir, strict=args.strict, sandbox=args.sandbox, allow_run=args.allow_run, jobs=args.jobs,
                       adversarial=args.adversarial)
    print(json.dumps(to_json(rows), indent=2) if args.json else table(rows))
    return 0 if all(r.ok for r in rows) else 1


def _check_openenv(args) -> int:
    from trajkit.envs.openenv import check
    from trajkit.envs.openenv.connect import opener
    from trajkit.envs.openenv.rltask import default_adapter
    from trajkit.errors import ConfigError
    from trajkit.envs.imports import import_object

    if not args.reference:
        raise ConfigError("--openenv needs --reference pkg.module:policy (a scripted solver: messages -> reply)")
    url = args.openenv if "://" in args.openenv else None
    connect = opener(None if url else args.openenv, url)
    adapter = import_object(args.adapter, "--adapter") if args.adapter else default_adapter(connect, env=args.openenv)
    row = check.check_env(args.openenv, connect, adapter() if isinstance(adapter, type) else adapter,
                          import_object(args.reference, "--reference"), args.episodes, args.max_turns,
                          args.pass_reward, args.adversarial)
    print(check.to_json([row]) if args.json else check.table([row]))
    return 0 if row.ok else 1


def _check_verifiers(args) -> int:
    from trajkit.envs.imports import import_object
    from trajkit.envs.openenv.check import table, to_json
    from trajkit.envs.verifiers.check import check_taskset
    from trajkit.errors import ConfigError

    if not args.reference:
        raise ConfigError("--verifiers needs --reference pkg.module:policy (a scripted solver: messages -> reply)")
    try:
        config = json.loads(args.env_config) if args.env_config else None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--env-config must be a JSON object of the taskset's config fields: {exc}") from None
    row = check_taskset(args.verifiers, import_object(args.reference, "--reference"), args.episodes,
                        args.pass_reward, args.adversarial, config, args.path, args.max_turns, args.jobs)
    print(to_json([row]) if args.json else table([row]))
    return 0 if row.ok else 1


def cmd_clean(args) -> int:
    from trajkit.envs.sandbox.slots import clean_stale

    removed = clean_stale()
    for path in removed:
        print(f"removed {path}")
    print(f"{len(removed)} stale sandbox{'es' if len(removed) != 1 else ''} removed")
    return 0


COMPILE_EPILOG = """Example:
  trajkit envs compile skills/pdf/SKILL.md --model http://127.0.0.1:8000/v1 --model-name qwen --out tasks/pdf

The model (any OpenAI-compatible endpoint: trajkit serve, vLLM, a hosted API) plans up to --tasks task titles
from the skill, then writes each task's instruction.md, tests/test.sh and solution/solve.sh; trajkit writes
task.toml, runs the static checks and the Oracle and NOP agents, and keeps only the tasks that pass (OUT/NAME;
the others under OUT/rejected/ with the reason in OUT/compile.json). Exit 0 when a task was kept, else 1."""


def cmd_compile(args) -> int:
    from trajkit.envs.harbor.compile import compile_skill
    from trajkit.envs.harbor.rubric import ChatModel

    rows = compile_skill(args.skill, ChatModel(args.model, args.model_name, args.api_key), args.out, args.tasks,
                         args.sandbox)
    for r in rows:
        print(f"{r.verdict:<30} {r.name:<40} {r.detail[:100]}")
    kept = sum(r.verdict == "ok" for r in rows)
    print(f"{kept} of {len(rows)} tasks kept in {args.out}")
    return 0 if kept else 1


GENERATE_EPILOG = """Examples:
  trajkit envs generate --families all --split train --n 20 --seed 0 --out tasks/train
  trajkit envs generate --families all --split heldout --n 5 --seed 0 --out tasks/heldout
  trajkit envs check tasks/heldout --adversarial                 # Oracle 1, NOP 0, no hack pays
  trajkit audit data --train tasks/train/tasks.jsonl --eval tasks/heldout/tasks.jsonl

Families: write-file, count-matches, rename-ext, sort-lines, json-sum, csv-to-json, greet-script, env-value,
and the held-out-only count-lines, upper-case (never in --split train; in 'all' for --split heldout). A held-out
instance has parameters no train instance can have (a hash split) and its family's held-out wording. Each
instance is a Harbor task folder OUT/FAMILY-HASH; OUT/tasks.jsonl lists them (id, family, split, prompt,
answer) for trajkit audit data. The same flags write the same folder (docs/envs.md).

--families compose: the composed kinds (40 trained pipelines of primitives such as match-sort-json; with
--split heldout also 8 unseen compositions and 8 kinds using the never-trained primitives lower, reverse, min;
each row's heldout_kind says which). Any kind can be named alone: --families match-sort-json,lines-sum-text.
--phrasings 6 words their train instructions more ways (RL on wording wider than the SFT data's:
  trajkit envs generate --families compose --split train --n 10 --phrasings 6 --out tasks/train6).
--probe-wording 0 writes the held-out instances (same names, data and answers) in train wording 0: a policy
that passes them but not the held-out folder fails on the wording, not the skill (docs/envs.md)."""


def cmd_generate(args) -> int:
    from collections import Counter

    from trajkit.envs.harbor.families import generate

    rows = generate(args.families, args.split, args.n, args.seed, args.out, args.phrasings, args.probe_wording)
    counts = Counter(r["family"] for r in rows)
    print("\n".join(f"{family:<16} {n}" for family, n in counts.items()))
    print(f"{len(rows)} {args.split} tasks of {len(counts)} families in {args.out} (manifest: {args.out}/tasks.jsonl)")
    return 0


EVAL_EPILOG = """Examples:
  trajkit envs eval tasks/heldout --model ~/.cache/trajkit/models/SmolLM2-135M-Instruct --json
  trajkit envs eval tasks/heldout --model runs/sft/final --samples 4 --temperature 1.0 --save-dir runs/eval

The model (a Hugging Face folder) is served by trajkit's gateway on a loopback port; every trial runs the
shell agent in a fresh sandbox against it, as task.name=harbor training does. A failed trial scores 0 and is
counted in errors. Pass rates: per task the mean of its samples (± sd/sqrt(K)); per family and overall the mean
of the tasks' pass rates (± sd over tasks / sqrt(n_tasks): tasks are the sampled unit). With --samples K > 1,
pass@k for k = 1, 2, 4, ..., K (unbiased, Chen et al. 2021; a sample solves when it scores >= --pass-reward):
pass@K far above pass@1 is headroom that RL's sharpening can take. --json prints {"pass_rate": ...,
"stderr": ..., "pass_at_k": {"1": ..., "K": ...}, "families": {...}, "tasks": [...]}. --save-dir keeps every
conversation as the gateway's samples.jsonl and hermes.jsonl (trajkit traces stats DIR/hermes.jsonl)."""


def cmd_eval(args) -> int:
    from trajkit.config import from_args
    from trajkit.envs.harbor.evaluate import ModelEval, evaluate_model, table
    from trajkit.envs.harbor.task import load_tasks
    from trajkit.errors import InputError
    from trajkit.progress import progress_bar

    report = load_tasks(args.tasks, strict=True)
    if not report.tasks:
        raise InputError(f"{args.tasks}: no Harbor task folder here (instruction.md + task.toml + tests/test.sh)")
    how = from_args(ModelEval, args)
    with progress_bar(len(report.tasks) * how.samples, "trials", unit="trial") as bar:
        result = evaluate_model(report.tasks, args.model, how, args.save_dir, lambda _r: bar.update())
    print(json.dumps(result.to_json(), indent=1) if args.json else table(result))
    return 0


ORACLE_EPILOG = """Example:
  trajkit envs oracle-traces tasks/train --out sft/oracle.jsonl
  trajkit traces stats sft/oracle.jsonl
  trajkit traces export sft/oracle.jsonl --format tokens --tokenizer MODEL_DIR --out sft/tokens.jsonl

Each task's solution/solve.sh is replayed as the shell agent's reply (one bash block), its exit code and output
as the next user turn, then a closing reply, in a real trial; rows whose verifier pays 1 are kept as OpenAI chat
rows (id, messages, category = family, task, reward). Dropped runs are counted: error, exit code, wrong, no
command. Exit 1 when no row was kept."""


def cmd_oracle_traces(args) -> int:
    from trajkit.envs.harbor.trajectories import oracle_traces, write_rows
    from trajkit.envs.harbor.task import load_tasks

    rows, counts = oracle_traces(load_tasks(args.tasks, strict=True).tasks, args.jobs)
    write_rows(rows, args.out)
    dropped = {k: v for k, v in sorted(counts.items()) if k != "kept"}
    print(f"{len(rows)} trajectories kept in {args.out}; dropped: "
          + (", ".join(f"{k} {v}" for k, v in dropped.items()) or "none"))
    return 0 if rows else 1


def register(sub) -> None:
    p = sub.add_parser("envs", help=COMMANDS["envs"],
                       description="Harbor-format environments: load, sandbox, check (Oracle = 1, NOP = 0).",
                       epilog=CHECK_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    esub = p.add_subparsers(dest="envs_command", metavar="COMMAND")
    check = esub.add_parser("check", help="run the Oracle and NOP agents on each task and give a verdict",
                            description="Static checks, then the Oracle and NOP agents of each Harbor task in fresh "
                                        "sandboxes: a table (task, oracle, nop, verdict, seconds) or --json.",
                            epilog=CHECK_EPILOG + OPENENV_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("dir", nargs="?", help="a Harbor task folder or a folder of task folders")
    check.add_argument("--json", action="store_true", help="print JSON rows instead of the table")
    check.add_argument("--strict", action="store_true", help="stop at the first task that does not load")
    check.add_argument("--sandbox", choices=("namespace", "docker"), default="namespace",
                       help="where trials run (default: namespace, no daemon)")
    check.add_argument("--allow-run", action="store_true",
                       help="run Dockerfile RUN steps in the sandbox (on the host's userland, not the image's)")
    check.add_argument("--jobs", type=int, default=4, help="tasks checked at once (default 4)")
    check.add_argument("--adversarial", action="store_true",
                       help="also run the hack agents (plant a reward, shadow the verifier's Python and tools, "
                            "empty the inputs or outputs, trojan the outputs): a task any of them fools is "
                            "'hackable: PROBE' (docs/envs.md)")
    check.add_argument("--openenv", metavar="ENV", help="check an OpenEnv environment instead: pkg.module:Class (in "
                       "process) or ws://127.0.0.1:PORT (a local server)")
    check.add_argument("--verifiers", metavar="TASKSET", help="check a verifiers.v1 taskset instead (its id, "
                       "importable in the verifiers venv)")
    check.add_argument("--path", metavar="DIR", help="--verifiers: a folder added to the verifiers venv's import path")
    check.add_argument("--env-config", metavar="JSON", help="--verifiers: the taskset's config fields, a JSON object")
    check.add_argument("--reference", metavar="POLICY", help="--openenv/--verifiers: the scripted solver, "
                       "pkg.module:function")
    check.add_argument("--adapter", help="--openenv: observation/reply adapter, pkg.module:obj (default: the "
                       "action's one text field)")
    check.add_argument("--episodes", type=int, default=8, help="--openenv/--verifiers: seeds (tasks) "
                       "0..N-1 played (default 8)")
    check.add_argument("--max-turns", type=int, default=8, help="--openenv/--verifiers: replies per "
                       "episode (default 8)")
    check.add_argument("--pass-reward", type=float, default=1.0,
                       help="--openenv/--verifiers: the return the reference must reach on every seed "
                            "(default 1)")
    check.set_defaults(handler=cmd_check)
    clean = esub.add_parser("clean", help="remove sandboxes left by a killed process (processes, mounts, folders)",
                            description="Find namespace sandboxes whose owning process is gone (a trainer killed "
                                        "with SIGKILL), kill what runs under their uids, unmount and delete them. "
                                        "A new sandbox does the same when it starts.",
                            epilog="Example:\n  trajkit envs clean      # after a trainer was killed mid-trial",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    clean.set_defaults(handler=cmd_clean)
    comp = esub.add_parser("compile", help="Harbor tasks from an Agent Skill, kept when Oracle = 1 and NOP = 0",
                           description="Skill2Env-style: plan tasks from SKILL.md with a model, write them, check "
                                       "them, keep the sound ones.",
                           epilog=COMPILE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    comp.add_argument("skill", help="the skill's SKILL.md")
    comp.add_argument("--model", required=True, help="the model endpoint's base URL (ending in /v1)")
    comp.add_argument("--model-name", default="policy", help="the model name to request (default policy)")
    comp.add_argument("--api-key", default="trajkit", help="the API key to send")
    comp.add_argument("--out", required=True, help="where the kept tasks go")
    comp.add_argument("--tasks", type=int, default=4, help="how many tasks to plan (default 4)")
    comp.add_argument("--sandbox", choices=("namespace", "docker"), default="namespace")
    comp.set_defaults(handler=cmd_compile)
    gen = esub.add_parser("generate", help="write instances of parametric task families, train or held-out split",
                          description="Instances of trajkit's task families as Harbor task folders, split by "
                                      "parameters, instruction wording and family.",
                          epilog=GENERATE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    gen.add_argument("--families", default="all",
                     help="'all', 'compose' (the composed kinds) or a comma-separated list of family or kind names")
    gen.add_argument("--split", choices=("train", "heldout"), required=True, help="which split to draw from")
    gen.add_argument("--n", type=int, default=10, help="instances per family (default 10)")
    gen.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    gen.add_argument("--phrasings", type=int, default=3,
                     help="composed kinds: train phrasings each clause of a train instruction draws from, 1-6 "
                          "(default 3; 4-6 add other registers; the same seed keeps the same instances and data)")
    gen.add_argument("--probe-wording", type=int, default=None, metavar="K",
                     help="--split heldout: the same held-out instances in train wording K (0-2) instead of the "
                          "held-out wording, an eval probe that tells a wording gap from a skill gap (never train "
                          "on it)")
    gen.add_argument("--out", required=True, help="a new (or empty) folder for the tasks")
    gen.set_defaults(handler=cmd_generate)
    orc = esub.add_parser("oracle-traces", help="each task's Oracle replayed as a shell-agent conversation: SFT traces",
                          description="Replay every task's solution through the shell agent's protocol in a real "
                                      "trial; keep the runs the verifier pays as OpenAI chat rows.",
                          epilog=ORACLE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    orc.add_argument("tasks", help="a Harbor task folder or a folder of them")
    orc.add_argument("--out", required=True, help="the JSONL file to write")
    orc.add_argument("--jobs", type=int, default=4, help="trials at once (default 4)")
    orc.set_defaults(handler=cmd_oracle_traces)
    from trajkit.config import add_arguments
    from trajkit.envs.harbor.evaluate import ModelEval

    ev = esub.add_parser("eval", help="pass rate of a model with the shell agent on a folder of tasks (± stderr)",
                         description="Serve a model with trajkit's gateway and run the shell agent on every task "
                                     "in fresh sandboxes: pass rate per task, per family and overall.",
                         epilog=EVAL_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ev.add_argument("tasks", help="a Harbor task folder or a folder of them")
    ev.add_argument("--model", required=True, help="a Hugging Face model folder (tokenizer beside it)")
    ev.add_argument("--json", action="store_true", help='print {"pass_rate": ..., "tasks": [...]} instead of the table')
    ev.add_argument("--save-dir", default=None, help="save every trial's conversation here (samples, Hermes rows)")
    add_arguments(ev, ModelEval)
    ev.set_defaults(handler=cmd_eval)
