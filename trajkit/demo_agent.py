"""``trajkit demo agent``: the whole agentic loop in one command, for N seeds, resumable, with a report.

For each seed ``S`` (``OUT/seedS``):

1. **SFT** (:func:`trajkit.trainers.sft.run_sft`, config ``sft``, default ``sft_harbor_smollm2``, with
   ``seed=S`` and ``out_dir=OUT/seedS/sft``): task families (train / held-out instances / held-out families),
   Oracle traces, token export, fine-tune, ``sft/final``, held-out eval of the base model and of ``sft/final``;
2. **rl** (config ``rl``, default ``grpo_harbor_smollm2``, with ``seed=S``, ``policy.path=sft/final``,
   ``task.path=sft/tasks/train``, ``task.eval_path=sft/tasks/heldout``, ``eval.num_prompts`` = the number of
   held-out tasks, ``log.out_dir=OUT/seedS/rl``): GRPO from the SFT folder, held-out eval every
   ``eval.every`` steps, every step's episodes as OpenAI rows and ATIF;
3. **eval_rl**: the held-out eval of the last RL checkpoint's policy, exactly as base and SFT were evaluated
   (the SFT config's ``eval_*`` knobs: :func:`trajkit.trainers.sft.held_out`, i.e. ``trajkit envs eval``).

Then :mod:`trajkit.demo_agent_report` writes ``OUT/report.md``, ``OUT/report.json`` and the curves.

Overrides are ``sft.KEY=VALUE`` and ``rl.SECTION.KEY=VALUE`` (``--set``, repeatable): one config per half,
each the packaged config's loader, so the same command runs the tiny scripted policy (tests:
``sft.model_source=path sft.model=DIR``) and SmolLM2 (the packaged defaults). The keys the loop sets itself
(:data:`OWNED`) are refused with what to use instead.

Resume: the SFT phases are recorded in ``sft/phases.json`` (:mod:`trajkit.trainers.phases`), ``rl`` and
``eval_rl`` in ``seedS/phases.json`` under both configs; a rerun with the same configs skips every finished
phase of every seed. An RL phase killed part-way starts again from its first step (its folder is cleared).
"""
from __future__ import annotations

import shutil
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trajkit.config import to_tree
from trajkit.errors import ConfigError

OWNED = {"sft.seed": "--seeds", "sft.out_dir": "--out", "rl.seed": "--seeds", "rl.log.out_dir": "--out",
         "rl.policy.path": "--out (the loop trains from OUT/seedS/sft/final)",
         "rl.policy.source": "the loop trains from the seed's SFT folder",
         "rl.task.path": "sft.families / sft.train_n", "rl.task.eval_path": "sft.families / sft.heldout_n"}


@dataclass
class LoopConfig:
    """What ``trajkit demo agent`` runs: two packaged configs (or YAML files), their overrides, the seeds."""

    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    out: str = "runs/agent_loop"
    sft: str = "sft_harbor_smollm2"
    rl: str = "grpo_harbor_smollm2"
    overrides: list[str] = field(default_factory=list)


def parse_seeds(text: str) -> list[int]:
    """``"0,1,2"`` -> ``[0, 1, 2]``; a clear error for anything else.

    >>> parse_seeds("0, 2")
    [0, 2]
    """
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--seeds: {text!r} is not a comma-separated list of integers (e.g. 0,1,2)") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ConfigError(f"--seeds: {text!r}: give distinct non-negative seeds, e.g. 0,1,2")
    return seeds


def split_overrides(overrides: list[str]) -> tuple[list[str], list[str]]:
    """``sft.KEY=V`` / ``rl.KEY=V`` -> (sft overrides, rl overrides), prefixes removed."""
    halves: dict[str, list[str]] = {"sft": [], "rl": []}
    for text in overrides:
        key, eq, value = text.partition("=")
        prefix, dot, rest = key.partition(".")
        if not eq or not dot or prefix not in halves or not rest:
            raise ConfigError(f"--set {text!r}: expected sft.KEY=VALUE or rl.SECTION.KEY=VALUE "
                              "(e.g. sft.steps=4, rl.rollout.group_size=2)")
        if key in OWNED:
            raise ConfigError(f"--set {key}: set by the loop; use {OWNED[key]}")
        halves[prefix].append(f"{rest}={value}")
    return halves["sft"], halves["rl"]


def n_heldout(sft_cfg) -> int:
    from trajkit.envs.harbor.families.generate import resolve_families
    from trajkit.trainers.sft import split_families

    return sft_cfg.heldout_n * len(resolve_families(split_families(sft_cfg.families, "heldout"), "heldout"))


def seed_configs(cfg: LoopConfig, seed: int):
    """The SFT and RL configs of one seed (module docstring); every bad override fails here, before any run."""
    from trajkit.trainers.sft import load_sft_config
    from trajkit.rl import load_config

    sft_over, rl_over = split_overrides(cfg.overrides)
    folder = Path(cfg.out) / f"seed{seed}"
    with _naming("sft", cfg.sft):
        sft = load_sft_config(cfg.sft, [f"seed={seed}", f"out_dir={folder / 'sft'}", *sft_over])
    if not sft.heldout_n:
        raise ConfigError("sft.heldout_n: the loop evaluates on held-out tasks; set it to 1 or more")
    tasks = Path(sft.out_dir) / "tasks"
    with _naming("rl", cfg.rl):
        rl = load_config(cfg.rl, [f"seed={seed}", f"log.out_dir={folder / 'rl'}", "policy.source=path",
                                  f"policy.path={Path(sft.out_dir) / 'final'}", f"task.path={tasks / 'train'}",
                                  f"task.eval_path={tasks / 'heldout'}", f"eval.num_prompts={n_heldout(sft)}",
                                  "log.quiet=true", *rl_over])
    if rl.task.name != "harbor":
        raise ConfigError(f"rl.task.name: the loop trains on Harbor tasks; {cfg.rl} says {rl.task.name!r}")
    return sft, rl


class LoopProgress:
    """The loop's progress: a bar on a terminal (stage, seed, step/total, ETA), plain lines otherwise
    (:func:`trajkit.progress.progress_bar`). A unit is one phase or one RL step; the ETA counts only the units
    that ran (not those taken from a finished run's record)."""

    def __init__(self, total: int) -> None:
        from trajkit.progress import NoBar, progress_bar

        self.bar = progress_bar(total=total, desc="agent loop", unit="stage")
        self.plain = isinstance(self.bar, NoBar)
        self.total, self.done, self.ran, self.seconds = total, 0, 0, 0.0
        self.t0 = time.perf_counter()

    def advance(self, seed: int, what: str, skipped: bool = False) -> None:
        self.done += 1
        now = time.perf_counter()
        if not skipped:
            self.ran += 1
            self.seconds = now - self.t0
        left = self.total - self.done
        eta = f"{self.seconds / self.ran * left:.0f} s" if self.ran else "0 s" if not left else "?"
        if self.plain:
            self.bar.write(f"[{self.done}/{self.total}] seed {seed}: {what}{' (already done)' if skipped else ''}"
                           f" | {now - self.t0:.0f} s so far, ETA {eta}")
        else:
            self.bar.set_postfix_str(f"seed {seed}: {what}")
            self.bar.update()

    def write(self, line: str) -> None:
        self.bar.write(line)

    def close(self) -> None:
        self.bar.close()


def units(sft_cfg, rl_cfg) -> int:
    """Progress units of one seed: the SFT phases, the RL steps, the RL eval."""
    return 5 + int(sft_cfg.eval_before) + rl_cfg.steps + 1


def train_rl(rl_cfg, seed: int, progress: LoopProgress) -> dict:
    """GRPO from the SFT folder (a fresh start: an unfinished earlier attempt's folder is cleared) -> the
    metrics the report draws, and the final policy folder."""
    from trajkit.trainers.door import trainer_for

    out = Path(rl_cfg.log.out_dir)
    if out.exists():
        shutil.rmtree(out)
    history = trainer_for(rl_cfg)(rl_cfg, lambda r: progress.advance(seed, f"rl step {r.step}/{rl_cfg.steps}"))
    keep = ("step", "reward/raw", "reward/unscorable", "reward/groups_all_same", "eval/reward", "mismatch/max_abs",
            "env/failed", "sampler/informative", "sampler/solved", "sampler/unsolved", "sampler/unprofiled",
            "sampler/mean_pass_rate", "sampler/profile_trials_total", "sampler/retired", "sampler/top_ups")
    return {"history": [{k: h[k] for k in keep if k in h} for h in history],
            "policy": str(out / "checkpoints" / f"step_{rl_cfg.steps:06d}" / "policy")}


def run_seed(seed: int, sft_cfg, rl_cfg, progress: LoopProgress) -> dict:
    """One seed's SFT, RL and RL eval (module docstring) -> its records."""
    from trajkit.trainers.phases import Phases
    from trajkit.trainers.door import trainer_for
    from trajkit.trainers.sft import held_out

    sft = trainer_for(sft_cfg)(sft_cfg, log=progress.write,
                  on_phase=lambda name, _s, skipped: progress.advance(seed, f"sft {name}", skipped))
    folder = Path(sft_cfg.out_dir).parent

    def on_phase(name: str, _seconds: float, skipped: bool) -> None:
        if name == "eval_rl":
            progress.advance(seed, "rl held-out eval", skipped)
        elif skipped:  # a finished RL phase: its steps were not run again
            for step in range(1, rl_cfg.steps + 1):
                progress.advance(seed, f"rl step {step}/{rl_cfg.steps}", True)

    phases = Phases(folder / "phases.json", {"sft": asdict(sft_cfg), "rl": _jsonable(rl_cfg)}, progress.write,
                    f"seed {seed}", on_phase)
    rl = phases.run("rl", train_rl, rl_cfg, seed, progress)
    eval_rl = phases.run("eval_rl", held_out, sft_cfg, Path(sft_cfg.out_dir), rl["policy"])
    return {"sft": sft, "rl": rl, "eval_rl": eval_rl, "seconds": {**sft["seconds"], **phases.seconds}}


@contextmanager
def _naming(prefix: str, path: str):
    """A config error of one half, told as the ``--set`` key the user wrote (``sft.`` / ``rl.`` prefixed)."""
    try:
        yield
    except ConfigError as exc:
        raise ConfigError(f"{prefix} ({path}, --set {prefix}.KEY=VALUE): {exc}") from None


def _jsonable(cfg) -> dict:
    import json

    return json.loads(json.dumps(to_tree(cfg), default=str))


def run_loop(cfg: LoopConfig) -> dict:
    """Every seed (module docstring), then the report -> the report's JSON (also ``OUT/report.json``)."""
    from trajkit.demo_agent_report import write_report
    from trajkit.progress import quiet_transformers

    quiet_transformers()  # its weight-loading bars would break the loop's one progress display
    configs = {s: seed_configs(cfg, s) for s in cfg.seeds}  # all overrides checked before anything runs
    progress = LoopProgress(sum(units(*c) for c in configs.values()))
    t0 = time.perf_counter()
    try:
        runs = {s: run_seed(s, *configs[s], progress) for s in cfg.seeds}
    finally:
        progress.close()
    return write_report(cfg, configs, runs, round(time.perf_counter() - t0, 1))
