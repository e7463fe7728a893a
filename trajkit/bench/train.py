"""Benchmark: the RL step with and without speculative rollouts, side by side in one process.

The same config runs as up to three arms that share the seed (hence the prompts) and take their steps in
lockstep (arm A step 1, arm B step 1, ..., arm A step 2, ...), so a noisy shared CPU slows all arms
alike and the ratios stay fair:

- ``plain``: no drafter; ``spec``: speculative rollouts with the config's drafter (``draft.kind``),
  distilled online on the fresh rollouts (draft refresh); ``spec_fixed``: the same draft, never refreshed.

``--arm NAME="key=value ..."`` (repeatable) replaces those three with arms of your own, e.g. the optimiser
comparison ``--arm adamw="optim.name=adamw" --arm logra="optim.name=logra optim.logra.rank=256"``.
``--control random`` adds an arm ``random``: the first arm's overrides with ``shaping.control=random``
(trained on Bernoulli(0.5) rewards, evaluated on the task's), the spurious-reward control that
``trajkit audit seeds --control FILE.json:random`` compares a candidate with. ``--peer trl`` adds arm
``trl``: TRL's own ``GRPOTrainer`` on the first arm's prompts, rewards and settings, timed per stage and
evaluated by the same evaluator (:mod:`trajkit.bench.trl_peer`). An arm may change the backend or run on
Ray: ``--arm vllm=rollout.backend=vllm --arm ray2="cluster.ray=true cluster.rollout_workers=2"`` gives the
step time of each beside the in-process trajkit engine's (one local Ray, started first, serves them all).
With an agent task (``task.name=harbor task.path=trajkit/envs/tasks``, or ``agent``) those three are the
agent-task arms: the episodes (trials) run where the arm generates (in process; on the 2 Ray workers, each
its half of the rows), and the table adds steps/s, episodes/s (the step's rows over its wall seconds) and the
unscorable (failed, masked) share per arm.
``--arm sync= --arm async="rollout.mode=async rollout.max_staleness=1"`` compares synchronous and
asynchronous rollouts (with ``task.latency_median_s`` for long-tailed episodes, :mod:`trajkit.envs.latency`);
an asynchronous arm makes the arms run one after another, not in lockstep (its producer would use the
other arms' time), so run it on a quiet machine.

Reported: per-stage seconds (mean over steps, the first step excluded as warm-up), generation's share of
the step, every arm's step and generation-stage ratio against ``plain`` (plain seconds / the arm's; also
``step_speedup``/``generation_speedup`` for ``spec``), acceptance length per step of every drafting arm,
and, per seed, the held-out reward at the start and the end (``eval.every`` must be set) so the reward
curves of plain and speculative rollouts can be compared across seeds. Every arm's wall-clock seconds per
step, steps per hour and train reward per hour, and their ratios to the first arm (``vs_first``).
"""
from __future__ import annotations

import json
import statistics
import time

from trajkit.rl.config import load_config
from trajkit.rl.stages import GENERATION, STAGES

DESCRIPTION = ("RL training arms side by side (per-stage seconds, steps and reward per hour, reward over "
               "seeds); default arms: with vs without speculative rollouts (acceptance length with/without "
               "draft refresh)")
ARMS = {"plain": ["draft.kind=none", "draft.distill=false"],  # the config's drafter in the other two
        "spec": ["draft.distill=true"],
        "spec_fixed": ["draft.distill=false"]}


def add_arguments(p) -> None:
    p.add_argument("--config", default="rep", help="training config: a YAML file or a packaged config name "
                   "(rep, grpo_smollm2, grpo_smollm2_long)")
    p.add_argument("--steps", type=int, default=20, help="steps per arm (0 = the config's steps)")
    p.add_argument("--seeds", type=int, default=1, help="run seeds 0..N-1 (reward table needs >= 3)")
    p.add_argument("--no-fixed", action="store_true", help="skip the never-refreshed draft arm")
    p.add_argument("--arm", action="append", default=[], metavar='NAME="key=value ..."',
                   help="an arm of your own (repeatable; replaces plain/spec/spec_fixed): its name and the "
                        "overrides it adds to the shared ones, e.g. logra=\"optim.name=logra optim.logra.rank=256\"")
    p.add_argument("--control", choices=["random"], default=None,
                   help="add a control arm: the first arm trained on random (Bernoulli 0.5) rewards")
    p.add_argument("--peer", choices=["trl"], default=None,
                   help="add TRL's GRPOTrainer as an arm on the same prompts, rewards and settings")
    p.add_argument("--peer-order", choices=["alternate", "after"], default="alternate",
                   help="with --peer: 'alternate' runs the peer after trajkit's arms on even seeds and before them "
                        "on odd seeds (so neither side always runs on a machine the other has warmed or loaded); "
                        "'after': always after")
    p.add_argument("--out", default="bench-out/train.json", help="where to write the results (JSON)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of the table")
    p.add_argument("--plot", default="bench-out/train.png", help="where to write the plot ('' = none)")
    p.add_argument("overrides", nargs="*", help="key=value config overrides, e.g. rollout.group_size=4")
    p.epilog = ("Examples: trajkit bench train --steps 30 --seeds 3 --out bench-out/train.json\n"
                "          trajkit bench train --config grpo_smollm2 --seeds 3 --no-fixed draft.kind=ngram\n"
                "          trajkit bench train --config grpo_smollm2_long --seeds 3 draft.kind=eagle \\\n"
                "              draft.model.source=prepared draft.model.path=smollm2-135m-instruct-eagle\n"
                "          trajkit bench train --config grpo_smollm2 --seeds 3 --arm adamw=optim.name=adamw \\\n"
                "              --arm logra=\"optim.name=logra optim.logra.rank=256\"\n"
                "          trajkit bench train --seeds 3 --no-fixed --control random eval.every=10\n"
                "          trajkit bench train --config grpo_smollm2 --steps 8 --seeds 3 --arm sync= \\\n"
                "              --arm async=\"rollout.mode=async rollout.max_staleness=1 loss.decoupled=true\" eval.every=0\n"
                "          trajkit bench train --config grpo_smollm2 --seeds 3 --arm trajkit= --peer trl\n"
                "          trajkit bench train --config grpo_smollm2 --steps 3 --arm trajkit= \\\n"
                "              --arm vllm=rollout.backend=vllm --arm ray2=\"cluster.ray=true cluster.rollout_workers=2\"\n"
                "          trajkit bench train --config grpo_smollm2 --steps 3 --arm trajkit= \\\n"
                "              --arm vllm=rollout.backend=vllm --arm ray2=\"cluster.ray=true cluster.rollout_workers=2\" \\\n"
                "              task.name=harbor task.path=trajkit/envs/tasks rollout.group_size=4 eval.every=0")


def parse_arms(specs: list[str], no_fixed: bool = False, control: str | None = None) -> dict[str, list[str]]:
    """``--arm`` values (``NAME=key=value key=value``) -> {name: overrides}; none given -> the default arms;
    ``control="random"`` adds arm ``random``: the first arm's overrides plus ``shaping.control=random``."""
    arms = _arms(specs, no_fixed)
    if control is not None:
        if control in arms:
            raise SystemExit(f"--control {control}: an arm is already named {control!r}")
        arms[control] = list(next(iter(arms.values()))) + [f"shaping.control={control}"]
    return arms


def _arms(specs: list[str], no_fixed: bool) -> dict[str, list[str]]:
    import shlex

    if not specs:
        return {a: list(o) for a, o in ARMS.items() if not (no_fixed and a == "spec_fixed")}
    out = {}
    for spec in specs:
        name, sep, rest = spec.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise SystemExit(f"--arm {spec!r}: expected NAME=\"key=value ...\" with NAME a plain word, "
                             "e.g. --arm logra=\"optim.name=logra\"")
        if name in out:
            raise SystemExit(f"--arm {spec!r}: arm {name!r} given twice")
        overrides = shlex.split(rest)
        bad = [o for o in overrides if "=" not in o]
        if bad:
            raise SystemExit(f"--arm {name}: {bad[0]!r} is not a key=value override")
        out[name] = overrides
    return out


RAY_CPUS = 8  # logical CPUs of the local Ray the Ray and vLLM arms share (accounting only)


def _trainers(args, seed: int, steps: int):
    """One trainer per arm: in process, or on Ray for an arm with ``cluster.ray=true`` (then, and for a
    ``rollout.backend=vllm`` arm, one local Ray is started first and shared by every arm)."""
    from trajkit.trainers.door import stepper_for

    cfgs = {arm: load_config(args.config, list(args.overrides) + overrides +
                             [f"seed={seed}", f"steps={steps}", "checkpoint.every=0"])
            for arm, overrides in parse_arms(args.arm, args.no_fixed, args.control).items()}
    steppers = {arm: stepper_for(cfg) for arm, cfg in cfgs.items()}  # every arm checked before one is built
    if any(c.cluster.ray or c.rollout.backend != "trajkit" for c in cfgs.values()):
        from trajkit.backends.actors import ensure_ray

        ensure_ray(RAY_CPUS)
    return {arm: steppers[arm](cfg, logger=False) for arm, cfg in cfgs.items()}


def run_seed(args, seed: int, steps: int, progress=None) -> dict:
    """Lockstep steps of every arm for one seed -> {arm: {"steps": [...], "eval": [[step, reward]]}}; when
    an arm is asynchronous (``rollout.mode=async``) the arms run one after another instead, each closed
    before the next starts, since a producer thread would otherwise generate during the other arms' steps."""
    trainers = _trainers(args, seed, steps)
    record = {arm: {"steps": [], "eval": []} for arm in trainers}
    peer = getattr(args, "peer", None)
    try:
        if peer_first(args, seed):
            record[peer] = _trl_arm(args, next(iter(trainers.values())))
        for arm, t in trainers.items():
            if t.cfg.eval.every:
                record[arm]["eval"].append([0, t.evaluate()["eval/reward"]])
        if any(t.cfg.rollout.mode == "async" for t in trainers.values()):
            for arm, t in trainers.items():
                for step in range(steps):
                    _record_step(record[arm], t, step)
                    if progress:
                        progress(seed, step + 1, steps)
                t.stop_rollouts()  # its producer would generate during the next arm's steps
        for step in range(steps if all(t.cfg.rollout.mode == "sync" for t in trainers.values()) else 0):
            for arm, t in trainers.items():
                _record_step(record[arm], t, step)
            if progress:
                progress(seed, step + 1, steps)
        if peer == "trl" and not peer_first(args, seed):
            record["trl"] = _trl_arm(args, next(iter(trainers.values())))
    finally:
        for t in trainers.values():  # a vLLM backend's actor, a Ray run's workers
            t.close()
    return {arm: record[arm] for arm in [*trainers, *([peer] if peer else [])]}  # one key order every seed


def peer_first(args, seed: int) -> bool:
    """Whether the peer (``--peer``) runs before trajkit's arms for ``seed``: on odd seeds under
    ``--peer-order alternate`` (the default), never under ``after``."""
    return bool(getattr(args, "peer", None)) and getattr(args, "peer_order", "after") == "alternate" \
        and seed % 2 == 1


def _record_step(record: dict, t, step: int) -> None:
    m = _measured_step(t)
    record["steps"].append({k: v for k, v in m.items() if isinstance(v, (int, float))})
    if "eval/reward" in m:
        record["eval"].append([step + 1, m["eval/reward"]])


def _measured_step(t):
    """``t.step_once().metrics`` plus the step's peak GPU memory (``mem/peak_gb``; NaN on the CPU) and its
    wall-clock seconds (``wall/step_s``: everything ``step_once`` did, the async wait included)."""
    import torch

    side = t.state.side  # None under Ray: the policy worker's memory is not measured here
    policy = side.policy if side is not None else None
    cuda = torch.cuda.is_available() and policy is not None and next(policy.parameters()).is_cuda
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    result = t.step_once()
    m = result.metrics
    m["wall/step_s"] = time.perf_counter() - start
    m["wall/episodes"] = len(result.samples)  # the step's episodes (rows), dynamic-sampling refills not counted
    m["mem/peak_gb"] = torch.cuda.max_memory_allocated() / 2 ** 30 if cuda else float("nan")
    return m


def _trl_arm(args, first) -> dict:
    """TRL's GRPOTrainer on the first arm's config, prompts and reward functions; evaluated by a fresh
    trajkit trainer of that config (one evaluator for both)."""
    import tempfile

    from trajkit.bench.trl_peer import run_trl
    from trajkit.rl.build import policy_folder
    from trajkit.rl.trainer import Trainer

    cfg = first.cfg
    folder = policy_folder(cfg.policy)
    if folder is None:
        raise SystemExit("--peer trl needs a Hugging Face policy folder (policy.source path, hub or prepared)")
    evaluator = Trainer(cfg, logger=False)
    with tempfile.TemporaryDirectory(prefix="trl-peer-") as out:
        return run_trl(cfg, evaluator, first.state.rewards.funcs, first.state.tokenizer, folder, out)


def _mean(xs):
    return statistics.fmean(xs) if xs else float("nan")


def summarize(seeds: list[dict]) -> dict:
    """Per-arm stage means (warm-up step excluded), speedups, acceptance curves, reward table."""
    arms = list(seeds[0])
    out = {"arms": {}, "acceptance_length": {}, "reward": {}}
    for arm in arms:
        rows = [s for rec in seeds for s in rec[arm]["steps"][1:]]
        stages = {k: _mean([r[f"time/{k}"] for r in rows]) for k in STAGES}
        step = sum(stages.values())
        out["arms"][arm] = {"stage_seconds": stages, "step_seconds": step,
                            "generation_share": stages[GENERATION] / step if step else 0.0,
                            "acceptance_length": _mean([r["gen/acceptance_length"] for r in rows])}
        out["arms"][arm]["seed_step_seconds"] = [
            sum(_mean([r[f"time/{k}"] for r in rec[arm]["steps"][1:]]) for k in STAGES) for rec in seeds]
        out["arms"][arm].update(_train_curves(seeds, arm))
        out["arms"][arm]["wall_curve"] = _wall_curve(seeds, arm)
        out["arms"][arm].update(_per_hour(rows))
        out["acceptance_length"][arm] = [_mean([rec[arm]["steps"][i]["gen/acceptance_length"] for rec in seeds])
                                         for i in range(len(seeds[0][arm]["steps"]))]
        evals = [rec[arm]["eval"] for rec in seeds if rec[arm]["eval"]]
        if evals:
            first, last = [e[0][1] for e in evals], [e[-1][1] for e in evals]
            out["reward"][arm] = {"initial": first, "final": last, "initial_mean": _mean(first),
                                  "final_mean": _mean(last),
                                  "initial_std": statistics.stdev(first) if len(first) > 1 else 0.0,
                                  "final_std": statistics.stdev(last) if len(last) > 1 else 0.0,
                                  "curve": [[e[0], _mean([x[i][1] for x in evals]),
                                             statistics.stdev([x[i][1] for x in evals]) if len(evals) > 1 else 0.0]
                                            for i, e in enumerate(evals[0])]}
    first = out["arms"][arms[0]]
    out["vs_first"] = {a: {"steps_per_hour": r["steps_per_hour"] / first["steps_per_hour"],
                           "reward_per_hour": r["reward_per_hour"] / first["reward_per_hour"]
                           if first["reward_per_hour"] else float("nan"),
                           "episodes_per_s": r.get("episodes_per_s", float("nan")) / first["episodes_per_s"]
                           if first.get("episodes_per_s") else float("nan")}
                       for a, r in out["arms"].items() if a != arms[0]}
    if "plain" in out["arms"] and "spec" in out["arms"]:
        p, s = out["arms"]["plain"], out["arms"]["spec"]
        out["step_speedup"] = p["step_seconds"] / s["step_seconds"]
        out["generation_speedup"] = p["stage_seconds"][GENERATION] / s["stage_seconds"][GENERATION]
    if "plain" in out["arms"]:  # every other arm against plain: seconds of plain / seconds of the arm
        p = out["arms"]["plain"]
        out["vs_plain"] = {a: {"step": p["step_seconds"] / r["step_seconds"],
                               "generation": p["stage_seconds"][GENERATION] / r["stage_seconds"][GENERATION]}
                           for a, r in out["arms"].items() if a != "plain"}
    return out


def _per_hour(rows: list[dict]) -> dict:
    """Steps per wall-clock hour (3600 / mean ``wall/step_s``) and train reward per wall-clock hour (the mean
    ``reward/raw`` of the trained rows per step x steps per hour), over ``rows`` (warm-up step excluded); where
    the rows count their episodes (``wall/episodes``), steps/s and episodes/s (mean episodes per step over the
    mean wall seconds: the agent-task arms' throughput) and the share of unscorable (failed, masked) rows."""
    wall = _mean([r["wall/step_s"] for r in rows if "wall/step_s" in r])
    per_hour = 3600.0 / wall if wall == wall and wall > 0 else float("nan")
    reward = _mean([r["reward/raw"] for r in rows if r.get("reward/raw") == r.get("reward/raw")])
    out = {"wall_step_seconds": wall, "steps_per_hour": per_hour, "reward_per_hour": reward * per_hour}
    episodes = [r["wall/episodes"] for r in rows if "wall/episodes" in r]
    if episodes:
        out.update(steps_per_s=per_hour / 3600.0, episodes_per_s=_mean(episodes) * per_hour / 3600.0,
                   unscorable=_mean([r.get("reward/unscorable", 0.0) for r in rows]))
    return out


def _wall_curve(seeds: list[dict], arm: str) -> list[list[float]]:
    """Train reward against wall-clock time: ``[seconds since the arm's first step began, reward/raw]`` per
    step, both the mean over seeds (the x of reward-per-hour; empty when ``wall/step_s`` was not measured)."""
    runs = [rec[arm]["steps"] for rec in seeds]
    if not all(all("wall/step_s" in r for r in steps) for steps in runs):
        return []
    clocks = [[sum(r["wall/step_s"] for r in steps[:i + 1]) for i in range(len(steps))] for steps in runs]
    return [[_mean([c[i] for c in clocks]), _mean([steps[i].get("reward/raw", float("nan")) for steps in runs])]
            for i in range(min(len(s) for s in runs))]


def _train_curves(seeds: list[dict], arm: str) -> dict:
    """Train reward and reply length (first and last step, mean over seeds) and the peak memory."""
    def at(key, i):
        return _mean([rec[arm]["steps"][i].get(key, float("nan")) for rec in seeds])
    every = [s.get("mem/peak_gb", float("nan")) for rec in seeds for s in rec[arm]["steps"]]
    finite = [x for x in every if x == x]
    return {"train_reward_first": at("reward/raw", 0), "train_reward_last": at("reward/raw", -1),
            "length_first": at("length/model_tokens", 0), "length_last": at("length/model_tokens", -1),
            "peak_gb": max(finite) if finite else float("nan")}


def table(summary: dict) -> str:
    arms = list(summary["arms"])
    lines = [f"{'stage (s/step)':<16}" + "".join(f"{a:>14}" for a in arms)]
    for k in STAGES:
        lines.append(f"{k:<16}" + "".join(f"{summary['arms'][a]['stage_seconds'][k]:>14.3f}" for a in arms))
    lines.append(f"{'step':<16}" + "".join(f"{summary['arms'][a]['step_seconds']:>14.3f}" for a in arms))
    lines.append(f"{'generation %':<16}" + "".join(f"{100 * summary['arms'][a]['generation_share']:>13.1f}%" for a in arms))
    lines.append(f"{'wall s/step':<16}" + "".join(f"{summary['arms'][a]['wall_step_seconds']:>14.3f}" for a in arms))
    lines.append(f"{'steps/hour':<16}" + "".join(f"{summary['arms'][a]['steps_per_hour']:>14.1f}" for a in arms))
    lines.append(f"{'reward/hour':<16}" + "".join(f"{summary['arms'][a]['reward_per_hour']:>14.1f}" for a in arms))
    for key, label, form in (("steps_per_s", "steps/s", ".4f"), ("episodes_per_s", "episodes/s", ".3f"),
                             ("unscorable", "unscorable %", ".1%")):
        if all(key in summary["arms"][a] for a in arms):
            lines.append(f"{label:<16}" + "".join(f"{summary['arms'][a][key]:>14{form}}" for a in arms))
    lines.append(f"{'accept. length':<16}" + "".join(f"{summary['arms'][a]['acceptance_length']:>14.2f}" for a in arms))
    for key, label in (("train_reward_first", "reward step 1"), ("train_reward_last", "reward last"),
                       ("length_first", "length step 1"), ("length_last", "length last"), ("peak_gb", "peak GB")):
        lines.append(f"{label:<16}" + "".join(f"{summary['arms'][a].get(key, float('nan')):>14.2f}" for a in arms))
    for a, r in summary["reward"].items():
        lines.append(f"reward {a:<10} initial {r['initial_mean']:.3f} ± {r['initial_std']:.3f}  "
                     f"final {r['final_mean']:.3f} ± {r['final_std']:.3f}  (n={len(r['final'])} seeds)")
    for a, curve in summary["acceptance_length"].items():
        if summary["arms"][a]["acceptance_length"] > 1.0:
            lines.append(f"accept/step {a:<10} " + " ".join(f"{x:.2f}" for x in curve))
    first_seeds = summary["arms"][arms[0]].get("seed_step_seconds", [])
    if len(first_seeds) > 1:  # per seed: each arm's s/step, and the first arm's seconds over the arm's
        for a in arms:
            mine = summary["arms"][a]["seed_step_seconds"]
            ratios = "" if a == arms[0] else f"   {arms[0]}/{a} " + " ".join(
                f"{f / x:.2f}" if x else "nan" for f, x in zip(first_seeds, mine))
            lines.append(f"step by seed {a:<10} " + " ".join(f"{x:.3f}" for x in mine) + ratios)
    for a, r in summary.get("vs_first", {}).items():
        lines.append(f"vs {arms[0]} {a:<12} steps/hour {r['steps_per_hour']:.2f}x   "
                     f"reward/hour {r['reward_per_hour']:.2f}x   episodes/s {r['episodes_per_s']:.2f}x")
    for a, r in summary.get("vs_plain", {}).items():
        lines.append(f"vs plain {a:<12} step {r['step']:.2f}x   generation {r['generation']:.2f}x")
    return "\n".join(lines)


def plot(summary: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drafting = [a for a in summary["arms"] if summary["arms"][a]["acceptance_length"] > 1.0]
    walled = [a for a in summary["arms"] if summary["arms"][a].get("wall_curve")]
    count = 1 + bool(drafting) + bool(summary["reward"]) + bool(walled)  # no empty held-out panel
    fig, panels = plt.subplots(1, count, figsize=(5 * count, 4), squeeze=False)
    panels = list(panels[0])
    axes = list(panels)
    if walled:  # the last panel: train reward against wall-clock seconds (what steps per hour buys)
        for arm in walled:
            xs, ys = zip(*summary["arms"][arm]["wall_curve"])
            axes[-1].plot(xs, ys, marker=".", label=arm)
        axes[-1].set(title="train reward vs wall-clock (mean over seeds)", xlabel="seconds", ylabel="reward/raw")
        axes = axes[:-1]
    if drafting:
        for arm in drafting:
            ys = summary["acceptance_length"][arm]
            axes[0].plot(range(1, len(ys) + 1), ys, label=arm)
        axes[0].set(title="acceptance length per step", xlabel="step", ylabel="tokens per target call")
        axes = axes[1:]
    arms = list(summary["arms"])
    bottom = [0.0] * len(arms)
    for k in STAGES:
        vals = [summary["arms"][a]["stage_seconds"][k] for a in arms]
        axes[0].bar(arms, vals, bottom=bottom, label=k)
        bottom = [b + v for b, v in zip(bottom, vals)]
    axes[0].set(title="seconds per step by stage")
    for arm, r in summary["reward"].items():
        xs, ys, sd = zip(*r["curve"])
        line, = axes[1].plot(xs, ys, marker="o", label=f"{arm} (n={len(r['final'])})")
        axes[1].fill_between(xs, [y - d for y, d in zip(ys, sd)], [y + d for y, d in zip(ys, sd)],
                             color=line.get_color(), alpha=0.2)
    if summary["reward"]:
        axes[1].set(title="held-out reward (mean ± std over seeds)", xlabel="step")
    for ax in panels:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")  # the atomic writer's temporary name has no .png suffix
    plt.close(fig)


def run(args) -> int:
    from trajkit.progress import progress_bar, quiet_transformers

    quiet_transformers()
    parse_arms(args.arm, args.no_fixed, args.control)  # a malformed --arm fails before any model loads
    steps = args.steps or load_config(args.config, list(args.overrides)).steps
    start = time.perf_counter()
    seeds = []
    for seed in range(args.seeds):
        with progress_bar(total=steps, desc=f"seed {seed}", unit="step") as bar:
            seeds.append(run_seed(args, seed, steps, progress=lambda _seed, i, _steps: bar.update(i - bar.n)))
        if args.out and seed + 1 < args.seeds:  # a long run leaves its finished seeds behind
            from trajkit.atomic import write_atomic

            write_atomic(args.out, json.dumps({"partial": True, "runs": seeds}, indent=1))
    summary = summarize(seeds)
    summary.update(config=args.config, overrides=list(args.overrides), steps=steps, seeds=args.seeds,
                   wall_seconds=time.perf_counter() - start)
    if getattr(args, "peer", None):
        summary["peer_first"] = [peer_first(args, seed) for seed in range(args.seeds)]
    from trajkit.atomic import AtomicFile, write_atomic

    print(json.dumps(summary, indent=1) if args.json else table(summary))
    if args.out:
        write_atomic(args.out, json.dumps({"summary": summary, "runs": seeds}, indent=1))
    if args.plot:
        with AtomicFile(args.plot, "plot") as tmp:
            plot(summary, str(tmp))
    if not args.json:
        print("wrote " + " and ".join(p for p in (args.out, args.plot) if p))
    return 0
