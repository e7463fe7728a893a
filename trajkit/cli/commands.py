"""The command groups of ``trajkit``, as plain data: name -> one-line help.

:func:`trajkit.cli.main.build_parser` lists every group from this table but imports only the module of the
group being run (``trajkit.cli.<name>``, which registers it with ``register(subparsers)`` and takes its
help line from here), so ``trajkit --version`` and ``trajkit --help`` import no command module at all.
"""

COMMANDS: dict[str, str] = {
    "traces": "parse, analyse, visualise and export agent traces",
    "generate": "sample completions (speculative decoding with a drafter)",
    "serve": "serve a local model over the OpenAI API, recording exact token trajectories",
    "bench": "run a side-by-side benchmark (prints a table or, with --json, JSON; writes JSON to --out)",
    "train": "RL post-training (GRPO family) with speculative rollouts",
    "models": "prepare real models offline",
    "demo": "run every stage on the bundled data (offline)",
    "envs": "Harbor-format environments: check tasks in a sandbox (Oracle = 1, NOP = 0)",
    "audit": "catch results that are not real: leaks, seed noise, label bugs, tokenizer mismatches, reward hacks",
}
