"""The TRL peer arm of ``trajkit bench train --peer trl``: TRL's own ``GRPOTrainer`` on the same run.

Same prompts in the same order (the trajkit task's train stream, ``steps x rollout.prompts_per_step``
prompts, as a dataset TRL reads unshuffled), the same reward functions passed unchanged, the same
settings (:func:`to_trl` writes the trajkit config as a ``GRPOConfig``; :func:`trajkit.rl.trl_config.from_trl`
must read it back to the same trajkit settings, so the two directions cannot drift), the same policy
folder. Held-out reward comes from one evaluator for both: trajkit's :meth:`Trainer.evaluate` on a copy
of TRL's current weights, at the same steps as the trajkit arms.

Timing is taken by wrapping TRL's own methods: ``_generate`` (sampling with ``transformers.generate``) and
``_calculate_rewards`` make the ``generation`` stage, the rest of ``_generate_and_score_completions`` (old
and reference log-probs when TRL needs them, advantages, padding) the ``logprob`` stage, and the rest of
each optimiser step (forward, backward, AdamW) ``policy_update``; TRL has no separate weight-sync or data
stage (its generation runs on the training weights). Peak memory is ``torch.cuda.max_memory_allocated``
per step on a GPU; on the CPU there is no per-arm figure in one process (reported as NaN).

Deviation: the TRL arm runs after the trajkit arms of each seed (its loop is TRL's own), not in lockstep,
so on a noisy machine its timings see a different moment of the noise.
"""
from __future__ import annotations

import math
import time
from collections import defaultdict

from trajkit.rl.config import TrainConfig
from trajkit.rl.stages import DATA, GENERATION, LOGPROB, POLICY_UPDATE, WEIGHT_SYNC

# the trajkit settings the TRL arm must reproduce (read back through from_trl); the rest are placement/logging
SHARED = ("seed", "steps", "reward_weights", "optim.lr", "optim.lr_schedule", "optim.warmup_steps",
          "optim.weight_decay", "optim.beta1", "optim.beta2", "optim.eps", "optim.grad_clip", "optim.num_iterations",
          "optim.minibatches", "rollout.group_size", "rollout.prompts_per_step", "rollout.max_new_tokens",
          "rollout.temperature", "loss.name", "loss.clip_low", "loss.clip_high", "loss.scale_rewards",
          "loss.kl_coef", "loss.kl_ratio", "policy.dtype")
TRL_LOSS = {"grpo": ("grpo", "token"), "dapo": ("dapo", "token"), "dr_grpo": ("dr_grpo", "token"),
            "gspo": ("grpo", "sequence")}


def _get(cfg, key: str):
    node = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return node


def to_trl(cfg: TrainConfig, output_dir: str, use_cpu: bool) -> dict:
    """The ``GRPOConfig`` keyword arguments of ``cfg`` (one process; rows per optimiser step in one
    forward, the generation batch split into ``optim.minibatches`` steps)."""
    from trajkit.rl.losses import LOSSES

    if cfg.loss.name not in TRL_LOSS or cfg.loss.tis or cfg.rollout.dynamic_sampling:
        raise SystemExit("--peer trl: TRL runs the losses grpo, dapo, dr_grpo, gspo without loss.tis or "
                         "rollout.dynamic_sampling; drop those from the config (a drafter is fine: lossless)")
    if cfg.shaping.overlong_buffer or cfg.shaping.length_penalty or cfg.shaping.control != "none":
        raise SystemExit("--peer trl: length shaping and reward controls are trajkit's; turn them off for the peer")
    spec = LOSSES[cfg.loss.name]
    rows = cfg.rollout.prompts_per_step * cfg.rollout.group_size
    if rows % cfg.optim.minibatches:
        raise SystemExit(f"--peer trl: {rows} rows per step do not split into optim.minibatches="
                         f"{cfg.optim.minibatches} equal optimiser steps")
    loss_type, level = TRL_LOSS[cfg.loss.name]
    low = spec.clip_low if cfg.loss.clip_low is None else cfg.loss.clip_low
    high = spec.clip_high if cfg.loss.clip_high is None else cfg.loss.clip_high
    return dict(
        output_dir=output_dir, seed=cfg.seed, learning_rate=cfg.optim.lr, weight_decay=cfg.optim.weight_decay,
        adam_beta1=cfg.optim.beta1, adam_beta2=cfg.optim.beta2, adam_epsilon=cfg.optim.eps,
        max_grad_norm=cfg.optim.grad_clip,
        lr_scheduler_type=cfg.optim.lr_schedule, warmup_steps=cfg.optim.warmup_steps,
        num_iterations=cfg.optim.num_iterations, per_device_train_batch_size=rows // cfg.optim.minibatches,
        gradient_accumulation_steps=1, steps_per_generation=cfg.optim.minibatches,
        max_steps=cfg.steps * cfg.optim.minibatches * cfg.optim.num_iterations,
        num_generations=cfg.rollout.group_size, max_completion_length=cfg.rollout.max_new_tokens,
        temperature=cfg.rollout.temperature, loss_type=loss_type, importance_sampling_level=level,
        epsilon=low, epsilon_high=high, scale_rewards=cfg.loss.scale_rewards, beta=cfg.loss.kl_coef,
        use_bias_correction_kl=cfg.loss.kl_ratio, reward_weights=cfg.reward_weights, shuffle_dataset=False,
        bf16=cfg.policy.dtype == "bfloat16", fp16=cfg.policy.dtype == "float16", use_cpu=use_cpu,
        gradient_checkpointing=cfg.optim.gradient_checkpointing, report_to=[], save_strategy="no",
        logging_steps=1, disable_tqdm=True)


def check_round_trip(cfg: TrainConfig, kwargs: dict) -> None:
    """``from_trl(to_trl(cfg))`` equals ``cfg`` on every shared setting, else SystemExit naming the first."""
    from trajkit.rl.trl_config import from_trl

    back = from_trl(kwargs)
    for key in SHARED:
        ours, theirs = _get(cfg, key), _get(back, key)
        if key in ("loss.clip_low", "loss.clip_high") and ours is None:
            continue  # the loss's paper value, written out explicitly for TRL
        if ours != theirs:
            raise SystemExit(f"--peer trl: {key} is {ours!r} in trajkit but {theirs!r} in the TRL arm")


class _Clock:
    """Seconds spent in wrapped TRL methods since the last :meth:`take`."""

    def __init__(self):
        self.spent: dict[str, float] = defaultdict(float)

    def wrap(self, obj, name: str) -> None:
        inner = getattr(obj, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.spent[name] += time.perf_counter() - start
        setattr(obj, name, timed)

    def take(self) -> dict[str, float]:
        out, self.spent = dict(self.spent), defaultdict(float)
        return out


def train_prompts(task, n: int) -> list[dict]:
    """The first ``n`` prompts of ``task``'s train stream as TRL dataset rows (prompt + reward columns)."""
    rows = []
    for i in range(n):
        p = task.prompt(i)
        rows.append({"prompt": p.source if p.source is not None else p.text, **p.columns})
    return rows


def run_trl(cfg: TrainConfig, evaluator, reward_funcs, tokenizer, folder: str, out_dir: str) -> dict:
    """TRL's GRPOTrainer for ``cfg.steps`` RL steps -> ``{"steps": [...], "eval": [[step, reward]]}``."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    cuda = torch.cuda.is_available() and cfg.policy.device != "cpu"
    kwargs = to_trl(cfg, out_dir, use_cpu=not cuda)
    check_round_trip(cfg, kwargs)
    data = Dataset.from_list(train_prompts(evaluator.state.task, cfg.steps * cfg.rollout.prompts_per_step))
    trainer = GRPOTrainer(model=folder, reward_funcs=list(reward_funcs), args=GRPOConfig(**kwargs),
                          train_dataset=data, processing_class=tokenizer)
    clock = _Clock()
    for name in ("_generate", "_calculate_rewards", "_generate_and_score_completions"):
        clock.wrap(trainer, name)
    record = {"steps": [], "eval": []}
    per_rl_step = cfg.optim.minibatches * cfg.optim.num_iterations

    def evaluate(step: int) -> None:
        evaluator.state.side.policy.load_state_dict(trainer.model.state_dict())
        record["eval"].append([step, evaluator.evaluate()["eval/reward"]])

    class Steps(TrainerCallback):
        def __init__(self):
            self.start, self.acc = 0.0, defaultdict(float)

        def on_step_begin(self, args, state, control, **kw):
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            self.start = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kw):
            """TRL logs a step's generation metrics after its on_step_end: fill them into the last row."""
            logs = logs or {}
            if record["steps"] and "reward" in logs:
                record["steps"][-1].update({"reward/raw": logs["reward"],
                                            "length/model_tokens": logs.get("completions/mean_length", math.nan),
                                            "length/truncated": logs.get("completions/clipped_ratio", math.nan)})

        def on_step_end(self, args, state, control, **kw):
            wall = time.perf_counter() - self.start
            spent = clock.take()
            gen = spent.get("_generate", 0.0) + spent.get("_calculate_rewards", 0.0)
            scored = spent.get("_generate_and_score_completions", 0.0)
            for key, value in ((GENERATION, gen), (LOGPROB, scored - gen), (POLICY_UPDATE, wall - scored)):
                self.acc[key] += value
            self.acc["peak"] = max(self.acc["peak"], torch.cuda.max_memory_allocated() / 2 ** 30) if cuda else math.nan
            if state.global_step % per_rl_step == 0:
                record["steps"].append(self._row())
                step = state.global_step // per_rl_step
                if cfg.eval.every and step % cfg.eval.every == 0:
                    evaluate(step)

        def _row(self) -> dict:
            row = {f"time/{DATA}": 0.0, f"time/{WEIGHT_SYNC}": 0.0, "gen/acceptance_length": 1.0,
                   "mem/peak_gb": self.acc["peak"], "reward/raw": math.nan, "length/model_tokens": math.nan}
            row.update({f"time/{k}": self.acc[k] for k in (GENERATION, LOGPROB, POLICY_UPDATE)})
            self.acc = defaultdict(float)
            return row

    trainer.add_callback(Steps())
    if cfg.eval.every:
        evaluate(0)
    trainer.train()
    return record
