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
solution, vacuous, hackable: PROBE."""


def cmd_check(args) -> int:
    if args.openenv:
        return _check_openenv(args)
    if not args.dir:
        raise SystemExit("trajkit envs check: give DIR (Harbor tasks) or --openenv ENV (see --help)")
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
    adapter = import_object(args.adapter, "--adapter") if args.adapter else default_adapter(connect)
    row = check.check_env(args.openenv, connect, adapter() if isinstance(adapter, type) else adapter,
                          import_object(args.reference, "--reference"), args.episodes, args.max_turns,
                          args.pass_reward, args.adversarial)
    print(check.to_json([row]) if args.json else check.table([row]))
    return 0 if row.ok else 1


def cmd_clean(args) -> int:
    from trajkit.envs.harbor.slots import clean_stale

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
    check.add_argument("--reference", metavar="POLICY", help="--openenv: the scripted solver, pkg.module:function")
    check.add_argument("--adapter", help="--openenv: observation/reply adapter, pkg.module:obj (default: the "
                       "action's one text field)")
    check.add_argument("--episodes", type=int, default=8, help="--openenv: seeds 0..N-1 played (default 8)")
    check.add_argument("--max-turns", type=int, default=8, help="--openenv: replies per episode (default 8)")
    check.add_argument("--pass-reward", type=float, default=1.0,
                       help="--openenv: the return the reference must reach on every seed (default 1)")
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
