"""``trajkit train sft_harbor_smollm2``: the SFT warm start of the agentic loop, from task families to a policy
folder that ``policy.path`` and ``trajkit serve --model`` load.

1. **tasks**: ``train_n`` training instances of every training family and ``heldout_n`` held-out instances of
   every family (:mod:`trajkit.envs.harbor.families`) under ``OUT/tasks/{train,heldout}``; of the ``families``
   listed, the held-out families (never trained on) are generated in the held-out split only; a composed
   kind's train instructions draw each clause from ``phrasings`` train phrasings (1-6, as ``trajkit envs
   generate --phrasings``);
2. **traces**: each training task's Oracle replayed through the shell agent's protocol in a real trial
   (:mod:`trajkit.envs.harbor.trajectories`), kept when the verifier pays 1 -> ``OUT/oracle.jsonl``;
3. **export**: those traces rendered with the policy's own chat template and checked token by token against
   their source (:func:`trajkit.traces.export.token_export.export_trace_tokens`, what ``trajkit traces export
   --format tokens`` runs) -> ``OUT/tokens.jsonl``: ``input_ids`` and ``labels`` (-100 off the assistant turns);
4. **fine-tune**: next-token cross-entropy on the labelled (assistant) tokens only, the output head applied at
   those positions only (:func:`sft_loss`, i.e. :func:`trajkit.models.fit.next_token_loss_at`: the value of the
   full-logits loss without ``[B, L, V]`` logits), AdamW with warmup and cosine decay
   (:func:`trajkit.models.fit.fit`), ``steps`` batches of ``batch_size`` examples drawn with replacement from a
   generator seeded by ``seed``;
5. **save**: ``OUT/final`` with ``save_pretrained`` (model and tokenizer);
6. **eval**: the held-out pass rate of the base model (``eval_before``) and of ``OUT/final`` with
   :func:`trajkit.envs.harbor.evaluate.evaluate_model` (greedy, ``eval_max_turns``), written to
   ``OUT/report.json`` with the counts of every phase and the wall time of each.

Each finished phase is recorded in ``OUT/phases.json`` with the config it ran under
(:mod:`trajkit.trainers.phases`); a rerun with the same ``out_dir`` and the same config takes those results
instead of running the phase again (a killed run resumes after its last finished phase).

Where it sits: in the trainers layer (:mod:`trajkit.trainers`), above the environments whose task families,
trials and evaluation it drives (:mod:`trajkit.envs.harbor`) and the SFT export it trains on
(:mod:`trajkit.traces.export`); nothing below imports it.

Why trajkit's own loop and not TRL's ``SFTTrainer``: the export is already token ids with labels checked
against the source; ``SFTTrainer`` would either re-tokenize the conversations with its own template handling
(a second tokenization path, the thing the export's checks exist to rule out) or take the ids as they are and
add nothing but a dependency. The loop is the one trajkit's recipes already train with (``fit``).
"""
from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar, Literal

from trajkit.config import Checked
from trajkit.errors import ConfigError


@dataclass
class SFTConfig(Checked):
    """The ``trainer: sft`` config (module docstring)."""

    trainer: Literal["sft"] = "sft"
    seed: int = 0
    threads: int = 2
    model_source: Literal["prepared", "path"] = "prepared"
    model: str = "smollm2-135m-instruct"
    families: str = "all"
    train_n: int = 40
    phrasings: int = 3
    heldout_n: int = 2
    steps: int = 16
    lr: float = 1.0e-4
    batch_size: int = 4
    warmup: int = 2
    max_length: int = 768
    eval_before: bool = True
    eval_max_turns: int = 3
    eval_max_tokens: int = 128
    eval_timeout_multiplier: float = 4.0
    eval_jobs: int = 4
    out_dir: str = "runs/sft_harbor_smollm2"

    __ranges__: ClassVar[dict[str, str]] = {"seed": "[0, inf)", "threads": "[0, inf)", "train_n": "[1, inf)",
                                            "phrasings": "[1, 6]",
                                            "heldout_n": "[0, inf)", "steps": "[1, inf)", "lr": "(0, inf)",
                                            "batch_size": "[1, inf)", "warmup": "[0, inf)", "max_length": "[16, inf)",
                                            "eval_max_turns": "[1, inf)", "eval_max_tokens": "[1, inf)", "eval_timeout_multiplier": "(0, inf)",
                                            "eval_jobs": "[1, inf)"}


def load_sft_config(path: str, overrides: list[str] = ()) -> SFTConfig:
    """The YAML file (or packaged config) with ``key=value`` overrides -> :class:`SFTConfig`."""
    import yaml

    from trajkit.config import from_dict, parse_override
    from trajkit.config import config_path

    with open(config_path(path), encoding="utf-8") as fh:
        tree = yaml.safe_load(fh) or {}
    for text in overrides:
        keys, value = parse_override(text)
        if len(keys) != 1:
            raise ConfigError(f"{text}: the sft config has no sections; use a top-level key")
        tree[keys[0]] = value
    return from_dict(SFTConfig, tree, where=path)


def is_sft_config(path: str | None) -> bool:
    """Whether the YAML at ``path`` (or packaged config) says ``trainer: sft``."""
    if path is None or "=" in path:
        return False
    import yaml

    from trajkit.config import config_path

    try:
        with open(config_path(path), encoding="utf-8") as fh:
            tree = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError):
        return False  # the RL loader reports it
    return isinstance(tree, dict) and tree.get("trainer") == "sft"


def model_folder(cfg: SFTConfig) -> str:
    if cfg.model_source == "path":
        return cfg.model
    from trajkit.recipes.prepared import PREPARE

    if cfg.model not in PREPARE:
        raise ConfigError(f"model: {cfg.model!r} is not a prepared model ({', '.join(PREPARE)})")
    return str(PREPARE[cfg.model]())


def split_families(families: str, split: str) -> str:
    """The ``families`` of a split: a held-out family (never trained on) is left out of the train split.

    >>> split_families("write-file,upper-case", "train"), split_families("write-file,upper-case", "heldout")
    ('write-file', 'write-file,upper-case')
    """
    from trajkit.envs.harbor.families import HELDOUT_FAMILIES
    from trajkit.envs.harbor.families.generate import heldout_only

    if families == "all" or split == "heldout":
        return families
    kept = [f.strip() for f in families.split(",") if f.strip() and not heldout_only(f.strip())]
    if not kept:
        raise ConfigError(f"families: {families!r} has no family to train on ({', '.join(HELDOUT_FAMILIES)} are "
                          "held-out only); add a training family")
    return ",".join(kept)


def make_tasks(cfg: SFTConfig, out: Path) -> dict:
    from trajkit.envs.harbor.families import generate

    counts = {}
    for split, n in (("train", cfg.train_n), ("heldout", cfg.heldout_n)):
        if n and not (out / "tasks" / split / "tasks.jsonl").exists():
            generate(split_families(cfg.families, split), split, n, cfg.seed, out / "tasks" / split, cfg.phrasings)
        counts[split] = n and len((out / "tasks" / split / "tasks.jsonl").read_text().splitlines())
    return counts


def make_traces(out: Path, jobs: int) -> dict:
    from trajkit.envs.harbor.trajectories import oracle_traces, write_rows
    from trajkit.envs.harbor.task import load_tasks

    rows, counts = oracle_traces(load_tasks(out / "tasks" / "train", strict=True).tasks, jobs)
    if not rows:
        raise ConfigError(f"no Oracle trajectory kept from {out / 'tasks' / 'train'}: {dict(counts)}")
    write_rows(rows, out / "oracle.jsonl")
    return dict(counts)


def export(out: Path, folder: str, max_length: int) -> dict:
    from trajkit.traces.load import iter_traces
    from trajkit.traces.export.token_export import export_trace_tokens
    from trajkit.traces.export.tokenize import TokenizeConfig

    summary, _ = export_trace_tokens(iter_traces([str(out / "oracle.jsonl")], strict=True), folder,
                                     TokenizeConfig(max_length=max_length), out / "tokens.jsonl", strict=True,
                                     progress=False)
    return {"examples": summary.examples, "tokens": summary.tokens, "trainable_tokens": summary.trainable_tokens,
            "trained_turns": summary.trained_turns, "dropped_turns": summary.dropped_turns}


def label_batches(rows: list[dict], batch_size: int, seed: int, pad: int):
    """Endless batches ``(ids: [B, L], mask: [B, L-1])`` drawn with replacement; ``mask[b, t]`` is 1 where token
    ``t + 1`` is labelled (an assistant token)."""
    import torch

    rng = random.Random(seed)
    while True:
        batch = [rows[rng.randrange(len(rows))] for _ in range(batch_size)]
        width = max(len(r["input_ids"]) for r in batch)
        ids = torch.full((batch_size, width), pad, dtype=torch.long)
        mask = torch.zeros(batch_size, width - 1)
        for b, r in enumerate(batch):
            n = len(r["input_ids"])
            ids[b, :n] = torch.tensor(r["input_ids"])
            mask[b, :n - 1] = torch.tensor([float(x != -100) for x in r["labels"][1:]])
        yield ids, mask


def sft_loss(model, ids, mask):
    """The fine-tuning loss: mean next-token cross-entropy over the labelled positions ``mask: [B, L-1]`` of
    ``ids: [B, L]`` (from :func:`label_batches`), the output head applied there only
    (:func:`trajkit.models.fit.next_token_loss_at`, shared with the scripted-reply recipe below this layer)."""
    from trajkit.models.fit import next_token_loss_at

    return next_token_loss_at(model, ids, mask)


def fine_tune(cfg: SFTConfig, out: Path, folder: str, log) -> list[float]:
    import torch

    from trajkit.models.fit import Schedule, fit
    from trajkit.models.load import load_model, load_tokenizer

    torch.manual_seed(cfg.seed)
    rows = [json.loads(line) for line in (out / "tokens.jsonl").read_text().splitlines()]
    model, tokenizer = load_model(folder, dtype=torch.float32), load_tokenizer(folder)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def loss(batch):  # right padding: a causal model's real positions never see the pads after them
        return sft_loss(model, *batch)

    schedule = Schedule(steps=cfg.steps, lr=cfg.lr, warmup=cfg.warmup, batch_size=cfg.batch_size,
                        seq_len=cfg.max_length, weight_decay=0.0)
    losses = fit(model, label_batches(rows, cfg.batch_size, cfg.seed, pad), loss, schedule, name="sft", log=log,
                 log_every=10)
    model.save_pretrained(out / "final")
    tokenizer.save_pretrained(out / "final")
    return losses


def held_out(cfg: SFTConfig, out: Path, folder: str) -> dict | None:
    from trajkit.envs.harbor.evaluate import ModelEval, evaluate_model
    from trajkit.envs.harbor.task import load_tasks

    if not cfg.heldout_n:
        return None
    tasks = load_tasks(out / "tasks" / "heldout", strict=True).tasks
    how = ModelEval(max_turns=cfg.eval_max_turns, max_tokens=cfg.eval_max_tokens, jobs=cfg.eval_jobs,
                    timeout_multiplier=cfg.eval_timeout_multiplier)
    return evaluate_model(tasks, folder, how).to_json()


def run_sft(cfg: SFTConfig, log=print, on_phase=None) -> dict:
    """Every phase of the module docstring; returns (and writes to ``OUT/report.json``) the report.
    ``on_phase(name, seconds, skipped)`` is told each phase as it ends (:class:`~trajkit.trainers.phases.Phases`)."""
    import torch

    from trajkit.trainers.phases import Phases

    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = {"config": asdict(cfg)}
    # each finished phase's result: a rerun of the same out_dir resumes after it
    phases = Phases(out / "phases.json", report["config"], log, "sft", on_phase)
    folder = model_folder(cfg)
    report["tasks"] = phases.run("tasks", make_tasks, cfg, out)
    report["traces"] = phases.run("traces", make_traces, out, cfg.eval_jobs)
    report["export"] = phases.run("export", export, out, folder, cfg.max_length)
    if cfg.eval_before:
        report["eval_base"] = phases.run("eval_base", held_out, cfg, out, folder)
    report["losses"] = phases.run("losses", fine_tune, cfg, out, folder, log)
    report["eval_sft"] = phases.run("eval_sft", held_out, cfg, out, str(out / "final"))
    report["seconds"] = phases.seconds
    (out / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return report
