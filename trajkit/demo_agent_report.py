"""The report of ``trajkit demo agent`` (:mod:`trajkit.demo_agent`): ``OUT/report.md`` and the same in
``OUT/report.json``, the curves as PNGs under ``OUT/curves/``.

- **pass rates** base -> SFT -> RL on the held-out tasks, split into *held-out instances* (held-out tasks of a
  family trained on: new parameters and wording) and *held-out families* (families never trained on; for the
  composed generator also its two classes, *unseen compositions* of trained primitives and kinds using a
  *primitive never trained*), each a
  mean over tasks with its standard error (:func:`trajkit.envs.harbor.evaluate.mean_se`, tasks as the unit, as
  ``trajkit envs eval``); per seed, and the mean over seeds with the standard error over seeds; and each
  evaluation's trial errors (timeouts, sandbox failures: scored 0, so a pass rate of 0 may be the machine's);
- **curves**: SFT loss, RL training reward (``reward/raw``), RL held-out pass rate (``eval/reward``; step 0
  is the SFT policy), the share of groups whose rewards agree (``reward/groups_all_same``) and the difficulty
  sampler's informative pool against the step, one line per seed (matplotlib's Agg canvas);
- **groups**: ``reward/groups_all_same`` at the first and last RL step and its mean, with the sampler's pools,
  and with dynamic sampling the tasks it drew, the groups it dropped and the constant groups it still trained on;
- **traces**: ``trajkit traces stats`` (:func:`trajkit.traces.stats.compute_stats`) of the first and the last RL
  step's saved episodes of each seed;
- **audits**: ``trajkit audit seeds`` (:func:`trajkit.audit.seeds.seed_checks`) with SFT as the baseline arm and
  RL as the candidate, a seed's score its held-out pass rate (one evaluation each), as independent arms and
  paired (``--paired``: each seed's RL run starts from that seed's SFT policy); ``trajkit audit data``
  (:func:`trajkit.audit.leaks.audit_data`) of every seed's training tasks against its held-out tasks.
"""
from __future__ import annotations

import json
from pathlib import Path

from trajkit.atomic import write_atomic
from trajkit.envs.harbor.evaluate import mean_se

ARMS = ("base", "sft", "rl")
SPLITS = ("heldout_instances", "heldout_families", "unseen_compositions", "unseen_primitives", "all")
SPLIT_NAMES = {"heldout_instances": "held-out instances (trained families)",
               "heldout_families": "held-out families (never trained on)",
               "unseen_compositions": "  of which: unseen compositions of trained primitives",
               "unseen_primitives": "  of which: kinds using a primitive never trained", "all": "all held-out tasks"}


def trained_families(sft_dir: Path) -> set[str]:
    rows = (sft_dir / "tasks" / "train" / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    return {json.loads(r)["family"] for r in rows}


def composed_class(family: str) -> str | None:
    """A composed kind's held-out class (``composition`` / ``primitive``, :mod:`trajkit.envs.harbor.families.compose`),
    None for a training kind or a family that is not composed.

    >>> composed_class("lines-reverse-text"), composed_class("match-replace-json"), composed_class("write-file")
    ('primitive', 'composition', None)
    """
    from trajkit.envs.harbor.families import compose

    return compose.heldout_kind(family) if family in compose.COMPOSE else None


def split_rates(evaluation: dict, trained: set[str]) -> dict:
    """An ``envs eval`` JSON -> ``{split: {pass_rate, stderr, n}}`` (None for a split with no task). The held-out
    families of the composed generator are also split into its two held-out classes."""
    tasks = evaluation["tasks"]
    unseen = [t for t in tasks if t["family"] not in trained]
    chosen = {"heldout_instances": [t for t in tasks if t["family"] in trained], "heldout_families": unseen,
              "unseen_compositions": [t for t in unseen if composed_class(t["family"]) == "composition"],
              "unseen_primitives": [t for t in unseen if composed_class(t["family"]) == "primitive"], "all": tasks}
    rates = {k: vars(mean_se([t["pass_rate"] for t in v])) if v else None for k, v in chosen.items()}
    return {**rates, "errors": evaluation["errors"]}


def seed_rates(run: dict, sft_dir: Path) -> dict:
    trained = trained_families(sft_dir)
    evals = {"base": run["sft"].get("eval_base"), "sft": run["sft"]["eval_sft"], "rl": run["eval_rl"]}
    return {arm: split_rates(e, trained) if e else None for arm, e in evals.items()}


def mean_rates(per_seed: dict) -> dict:
    """Per arm and split: the mean of the seeds' pass rates, its standard error over seeds."""
    out: dict = {}
    for arm in ARMS:
        out[arm] = {}
        for split in SPLITS:
            values = [r[arm][split]["pass_rate"] for r in per_seed.values() if r[arm] and r[arm][split]]
            out[arm][split] = vars(mean_se(values)) if values else None
    return out


def step_stats(rl_dir: Path, steps: int) -> dict:
    """``traces stats`` of the first and the last step's saved episodes (OpenAI rows)."""
    from trajkit.traces.stats import compute_stats

    out = {}
    for step in sorted({1, steps}):
        path = rl_dir / "samples" / f"step_{step:06d}.openai.jsonl"
        if not path.exists():
            out[str(step)] = None
            continue
        d = compute_stats([str(path)], progress=False).to_dict()
        rewards = [json.loads(x).get("metadata", {}).get("reward") for x in path.read_text().splitlines()]
        scored = [r for r in rewards if isinstance(r, (int, float))]
        out[str(step)] = {"path": str(path), "traces": d["traces"], "assistant_turns": d["assistant_turns"],
                          "mean_turns": d["distributions"]["turns"]["mean"],
                          "mean_reward": sum(scored) / len(scored) if scored else None,
                          "unscored": len(rewards) - len(scored)}
    return out


def audits(configs: dict, per_seed: dict) -> dict:
    """``audit seeds`` (RL vs SFT on the held-out pass rate) and ``audit data`` (train vs held-out tasks)."""
    from trajkit.audit.config import SeedConfig
    from trajkit.audit.leaks import audit_data
    from trajkit.audit.report import AuditReport
    from trajkit.audit.runs import SeedRun
    from trajkit.audit.seeds import seed_checks

    def arm(name: str) -> list[SeedRun]:
        return [SeedRun(f"{name} seed{s}", s, [(1, r[name]["all"]["pass_rate"])], r[name]["all"]["n"])
                for s, r in per_seed.items()]

    seeds = AuditReport(seed_checks(arm("sft"), arm("rl")))
    paired = AuditReport(seed_checks(arm("sft"), arm("rl"), SeedConfig(paired=True)))
    data = {}
    for s, (sft_cfg, _) in configs.items():
        tasks = Path(sft_cfg.out_dir) / "tasks"
        data[str(s)] = audit_data([str(tasks / "train" / "tasks.jsonl")], [str(tasks / "heldout" / "tasks.jsonl")])
    return {"seeds": {"verdict": seeds.verdict, "checks": seeds.as_dict()["checks"]},
            "seeds_paired": {"verdict": paired.verdict, "checks": paired.as_dict()["checks"]},
            "data": {s: {"verdict": r.verdict, "checks": r.as_dict()["checks"]} for s, r in data.items()}}


def draw_curves(runs: dict, folder: Path) -> dict:
    """SFT loss, RL reward and RL held-out pass rate against the step, one line per seed -> PNG paths."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    series = {
        "sft_loss": ("SFT loss (assistant tokens)", "loss",
                     {s: list(enumerate(r["sft"]["losses"], 1)) for s, r in runs.items()}),
        "rl_reward": ("RL training reward (reward/raw)", "mean reward",
                      {s: [(h["step"], h["reward/raw"]) for h in r["rl"]["history"] if "reward/raw" in h]
                       for s, r in runs.items()}),
        "rl_heldout": ("RL held-out pass rate (eval/reward; step 0 = SFT)", "pass rate",
                       {s: [(h["step"], h["eval/reward"]) for h in r["rl"]["history"] if "eval/reward" in h]
                        for s, r in runs.items()}),
        "rl_groups_all_same": ("RL groups with one reward (no advantage)", "share of groups",
                               {s: [(h["step"], h["reward/groups_all_same"]) for h in r["rl"]["history"]
                                    if "reward/groups_all_same" in h] for s, r in runs.items()}),
        "rl_pool": ("difficulty sampler: informative items (0 < pass rate < 1)", "items",
                    {s: [(h["step"], h["sampler/informative"]) for h in r["rl"]["history"]
                         if "sampler/informative" in h] for s, r in runs.items()}),
    }
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, (title, ylabel, lines) in series.items():
        fig = Figure(figsize=(5, 3.2))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for seed, points in lines.items():
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=f"seed {seed}")
        ax.set(title=title, xlabel="step", ylabel=ylabel)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if any(lines.values()):
            ax.legend(fontsize=8)
        else:  # e.g. rl.eval.every=0: no held-out eval during RL
            ax.text(0.5, 0.5, "no data in this run", ha="center", va="center", transform=ax.transAxes)
        fig.tight_layout()
        paths[name] = str(folder / f"{name}.png")
        fig.savefig(paths[name], dpi=100)
    return paths


def dynamic_stats(history: list[dict]) -> dict | None:
    """What dynamic sampling (``rollout.dynamic_sampling``, :mod:`trajkit.rl.dynamic`) drew over a run: tasks
    drawn, groups dropped as constant, groups trained on, and of those the constant ones it kept when its refills
    ran out (``dynamic/groups_topped_up``). None for a run without it. A step trains on ``drawn - dropped +
    topped_up`` groups, ``rollout.prompts_per_step`` >= 1 (the refills draw exactly the groups still missing).
    ``reward/groups_all_same`` counts every generated group, the dropped ones too, so with dynamic sampling it is
    not the share of the trained groups."""
    rows = [h for h in history if "dynamic/prompts_drawn" in h]
    if not rows:
        return None
    drawn, dropped, topped = (int(sum(h[f"dynamic/{k}"] for h in rows))
                              for k in ("prompts_drawn", "groups_dropped", "groups_topped_up"))
    trained = drawn - dropped + topped
    return {"steps": len(rows), "tasks_drawn": drawn, "groups_dropped": dropped, "groups_trained": trained,
            "trained_all_same": topped, "trained_all_same_share": topped / trained}


def group_stats(runs: dict) -> dict:
    """Per seed: ``reward/groups_all_same`` (the share of groups whose rewards agree, so no advantage) at the first
    and the last RL step and its mean over the steps; the difficulty sampler's pools at the last step (None
    with the uniform stream); dynamic sampling's draws (:func:`dynamic_stats`, None without it)."""
    out = {}
    for s, r in runs.items():
        hist = [h for h in r["rl"]["history"] if "reward/groups_all_same" in h]
        same = [h["reward/groups_all_same"] for h in hist]
        pools = {k.split("/", 1)[1]: v for k, v in (hist[-1] if hist else {}).items() if k.startswith("sampler/")}
        out[str(s)] = {"first": same[0] if same else None, "last": same[-1] if same else None,
                       "mean": sum(same) / len(same) if same else None, "sampler": pools or None,
                       "dynamic": dynamic_stats(r["rl"]["history"])}
    return out


def _rate(r: dict | None) -> str:
    if r is None:
        return "–"
    return f"{r['pass_rate']:.3f}" + (f" ± {r['stderr']:.3f}" if r["stderr"] is not None else "") + f" (n={r['n']})"


def markdown(report: dict) -> str:
    """The report as Markdown (every number is also in the JSON)."""
    lines = ["# Agentic loop: base -> SFT -> RL", "", f"Command: `{report['command']}`  ",
             f"Wall time of this invocation: {report['seconds']} s (stages taken from an earlier run's record "
             f"count 0); the stages' own seconds, summed over seeds: {sum(report['stage_seconds_total'].values()):.0f} s "
             f"({', '.join(f'{k} {v:.0f}' for k, v in report['stage_seconds_total'].items())})", "",
             "## Held-out pass rate (mean over tasks ± standard error; mean row: over seeds)", "",
             "| seed | split | base | SFT | RL |", "|---|---|---|---|---|"]
    rows = [(str(s), r) for s, r in report["per_seed"].items()] + [("mean", report["mean"])]
    for seed, r in rows:
        for split in SPLITS:
            cells = [_rate(r[arm][split] if r[arm] else None) for arm in ARMS]
            if split.startswith("unseen_") and set(cells) == {"–"}:
                continue  # no composed held-out kind in this run
            lines.append(f"| {seed} | {SPLIT_NAMES[split]} | " + " | ".join(cells) + " |")
    lines += ["", "Trial errors (agent or verifier timeouts, sandbox failures; each scored 0), per seed, base / SFT / RL: "
              + "; ".join(f"seed {seed} " + " / ".join(str(r[arm]["errors"]) if r[arm] else "–" for arm in ARMS)
                          for seed, r in report["per_seed"].items())]
    lines += ["", "## GRPO groups with one reward (`reward/groups_all_same`: no advantage, no gradient)", "",
              "| seed | first step | last step | mean over steps | sampler pools at the end |", "|---|---|---|---|---|"]
    for seed, g in report.get("groups", {}).items():
        fmt = lambda v: "–" if v is None else f"{v:.3f}"  # noqa: E731
        pools = ", ".join(f"{k} {v:g}" for k, v in g["sampler"].items()) if g["sampler"] else "uniform stream"
        lines.append(f"| {seed} | {fmt(g['first'])} | {fmt(g['last'])} | {fmt(g['mean'])} | {pools} |")
    drew = {seed: g["dynamic"] for seed, g in report.get("groups", {}).items() if g.get("dynamic")}
    if drew:  # reports written before dynamic_stats have no "dynamic" key
        lines += ["", "Dynamic sampling drew fresh tasks in place of the groups whose rewards agreed; the share "
                  "above counts every group it generated, the dropped ones too:", "",
                  "| seed | tasks drawn | groups dropped | groups trained | trained groups all the same |",
                  "|---|---|---|---|---|"]
        for seed, d in drew.items():
            per = d["tasks_drawn"] / d["groups_trained"]
            lines.append(f"| {seed} | {d['tasks_drawn']} ({per:.2f} a trained group) | {d['groups_dropped']} | "
                         f"{d['groups_trained']} | {d['trained_all_same']} ({d['trained_all_same_share']:.3f}) |")
    lines += ["", "## Curves", ""] + [f"![{k}](curves/{k}.png)" for k in report["curves"]]
    lines += ["", "## Episodes of the first and last RL step (`trajkit traces stats`)", "",
              "| seed | step | traces | assistant turns | mean turns | mean reward | unscored |",
              "|---|---|---|---|---|---|---|"]
    for seed, steps in report["traces"].items():
        for step, d in steps.items():
            if d:
                reward = "–" if d["mean_reward"] is None else f"{d['mean_reward']:.3f}"
                lines.append(f"| {seed} | {step} | {d['traces']} | {d['assistant_turns']} | {d['mean_turns']:.2f} | "
                             f"{reward} | {d['unscored']} |")
    audit = report["audit"]
    for key, title in (("seeds", "`trajkit audit seeds` (RL vs SFT, held-out pass rate)"),
                       ("seeds_paired", "`trajkit audit seeds --paired` (each seed's RL vs its own SFT policy)")):
        if key in audit:  # reports written before the paired audit have none
            lines += ["", f"## {title}: {audit[key]['verdict']}", ""]
            lines += [f"- {c['id']}: {c['verdict']} — {c['detail']}" for c in audit[key]["checks"]]
    lines += ["", "## `trajkit audit data` (training tasks vs held-out tasks)", ""]
    for seed, r in audit["data"].items():
        lines.append(f"- seed {seed}: {r['verdict']} (" + "; ".join(f"{c['id']} {c['verdict']}"
                                                               for c in r["checks"]) + ")")
    return "\n".join(lines) + "\n"


def write_report(cfg, configs: dict, runs: dict, seconds: float) -> dict:
    """Every part of the module docstring -> ``OUT/report.json`` and ``OUT/report.md``; returns the JSON."""
    out = Path(cfg.out)
    per_seed = {str(s): seed_rates(r, Path(configs[s][0].out_dir)) for s, r in runs.items()}
    report = {
        "command": "trajkit demo agent --seeds " + ",".join(map(str, cfg.seeds)) + f" --out {cfg.out}"
                   + (f" --sft {cfg.sft}" if cfg.sft != "sft_harbor_smollm2" else "")
                   + (f" --rl {cfg.rl}" if cfg.rl != "grpo_harbor_smollm2" else "")
                   + "".join(f" --set {o}" for o in cfg.overrides),
        "seconds": seconds, "per_seed": per_seed, "mean": mean_rates(per_seed),
        "curves": draw_curves(runs, out / "curves"), "groups": group_stats(runs),
        "traces": {str(s): step_stats(Path(configs[s][1].log.out_dir), configs[s][1].steps) for s in runs},
        "audit": audits(configs, per_seed),
        "folders": {str(s): {"sft": str(Path(configs[s][0].out_dir) / "final"), "rl": r["rl"]["policy"],
                             "heldout": str(Path(configs[s][0].out_dir) / "tasks" / "heldout")}
                    for s, r in runs.items()},
        "stage_seconds": {str(s): r["seconds"] for s, r in runs.items()},
    }
    totals: dict[str, float] = {}
    for r in runs.values():
        for k, v in r["seconds"].items():
            totals[k] = round(totals.get(k, 0.0) + v, 1)
    report["stage_seconds_total"] = totals
    write_atomic(out / "report.json", json.dumps(report, indent=1, default=str))
    write_atomic(out / "report.md", markdown(report))
    return report
