"""TRL's ``GRPOConfig`` (or a dict of its names) as a trajkit :class:`~trajkit.rl.config.TrainConfig`.

A TRL user's training arguments run unchanged: ``Trainer(model=..., reward_funcs=..., args=GRPOConfig(...),
train_dataset=...)``. A dict is read as ``GRPOConfig(**d)``, so it means exactly what TRL would make of it
(TRL's defaults and checks included). Every field is one of three kinds:

- **mapped** (:data:`DIRECT` and the derived fields of :func:`from_trl`): translated, TRL's defaults
  included, so an unchanged ``GRPOConfig`` behaves as in TRL (``loss_type="dapo"`` with ``epsilon_high``
  unset clips at 0.2 on both sides, learning rate 1e-6 decaying linearly, 512 completion tokens, ...);
- **no effect on training** (:data:`NO_EFFECT`: logging cadence, progress bars, run names): accepted;
- everything else (vLLM, DeepSpeed, entropy masks, ...): accepted only at TRL's default value; any other
  value raises a :class:`ConfigError` naming the field, never ignored.

Batch shape (one process): TRL generates ``generation_batch_size`` rows (``num_generations`` per prompt),
then takes ``steps_per_generation / gradient_accumulation_steps`` optimiser steps over them, each of
``per_device_train_batch_size x gradient_accumulation_steps`` rows, ``num_iterations`` times. In trajkit
that is ``rollout.prompts_per_step = generation_batch_size / num_generations``, ``rollout.group_size``,
``optim.minibatches``, ``optim.micro_batch_size = per_device_train_batch_size`` and
``optim.num_iterations``. ``max_steps`` counts optimiser steps (TRL's ``global_step``): trajkit's ``steps``
= ``max_steps / (minibatches x num_iterations)``; without it, ``num_train_epochs`` passes over the
dataset's prompts. Deviations: trajkit's minibatches are consecutive groups (TRL shuffles the rows of a
generation batch first), and the learning-rate schedule advances per RL step, not per optimiser step (the
same when there is one optimiser step per generation batch, TRL's default).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from trajkit.config import from_dict
from trajkit.errors import ConfigError
from trajkit.rl.config import TrainConfig

# TRL name -> trajkit key, value as it is
DIRECT = {
    "learning_rate": "optim.lr", "weight_decay": "optim.weight_decay", "adam_beta1": "optim.beta1",
    "adam_beta2": "optim.beta2", "num_iterations": "optim.num_iterations",
    "per_device_train_batch_size": "optim.micro_batch_size", "gradient_checkpointing": "optim.gradient_checkpointing",
    "num_generations": "rollout.group_size", "max_completion_length": "rollout.max_new_tokens",
    "temperature": "rollout.temperature", "beta": "loss.kl_coef", "use_bias_correction_kl": "loss.kl_ratio",
    "epsilon": "loss.clip_low", "shuffle_dataset": "task.shuffle", "output_dir": "log.out_dir", "seed": "seed",
    "reward_weights": "reward_weights",
}
# read by the derived mappings below (each sets the trajkit keys named in docs/rl.md)
DERIVED = ("epsilon_high", "loss_type", "importance_sampling_level", "scale_rewards", "max_grad_norm", "optim",
           "adam_epsilon", "lr_scheduler_type", "warmup_steps", "max_steps", "num_train_epochs", "bf16", "fp16",
           "use_cpu", "report_to", "save_only_model", "save_strategy", "save_steps", "eval_strategy", "eval_steps",
           "generation_batch_size", "steps_per_generation", "gradient_accumulation_steps", "activation_checkpointing")
# accepted at any value: they change what is printed or named, not what is trained
NO_EFFECT = ("logging_strategy", "logging_steps", "logging_first_step", "logging_nan_inf_filter", "log_level",
             "log_level_replica", "log_on_each_node", "disable_tqdm", "run_name", "project", "log_completions",
             "num_completions_to_print", "log_unique_prompts", "include_num_input_tokens_seen", "skip_memory_metrics",
             "dataloader_num_workers", "dataloader_pin_memory", "dataloader_persistent_workers",
             "dataloader_prefetch_factor", "remove_unused_columns", "save_total_limit", "per_device_eval_batch_size")
# loss_type, importance_sampling_level -> trajkit loss.name
LOSS_NAMES = {("grpo", "token"): "grpo", ("dapo", "token"): "dapo", ("dr_grpo", "token"): "dr_grpo",
              ("grpo", "sequence"): "gspo"}
WHY_NOT = {"bnpo": "trajkit's dapo is the token mean over the whole optimiser batch (TRL's dapo); bnpo's mean "
                   "per micro-batch changes with gradient accumulation, so it is not offered: use loss_type='dapo'"}
SCHEDULES = {"constant": "constant", "constant_with_warmup": "constant", "linear": "linear", "cosine": "cosine"}
REPORTERS = ("tensorboard", "wandb", "none")


def _name(value) -> str:
    """An enum's value (TRL turns some strings into ``transformers`` enums), else the string itself."""
    return str(getattr(value, "value", value))


def _grpo_config(args):
    """``args`` itself when it is a GRPOConfig-like object, else ``GRPOConfig(**args)``."""
    if isinstance(args, dict):
        from trl import GRPOConfig

        try:
            return GRPOConfig(**args)
        except TypeError as exc:  # an unknown keyword: TRL's message names it
            raise ConfigError(f"TRL config: {exc}") from None
    if not (hasattr(args, "num_generations") and hasattr(args, "loss_type")):
        raise ConfigError(f"args must be a trl.GRPOConfig or a dict of its fields, got {type(args).__name__}")
    return args


def _check_defaults(args) -> None:
    """Every field trajkit does not map must hold TRL's default: the value a GRPOConfig built from the
    mapped fields alone derives for it (TRL's ``__post_init__`` fills some from others)."""
    handled = set(DIRECT) | set(DERIVED) | set(NO_EFFECT)
    derived_twice = ("generation_batch_size", "activation_checkpointing")  # TRL derives these from the rest
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(args)
             if f.init and f.name in handled and f.name not in derived_twice}
    reference = type(args)(**given)
    for f in dataclasses.fields(args):
        if not f.init or f.name in handled:
            continue
        value, default = getattr(args, f.name), getattr(reference, f.name)
        if value != default:
            raise ConfigError(f"TRL config: {f.name}={value!r} has no trajkit equivalent (only TRL's default "
                              f"{default!r} is accepted); drop it, or see docs/rl.md 'From TRL' for what maps")


def _loss(args, tree: dict) -> None:
    kind = (_name(args.loss_type), _name(args.importance_sampling_level))
    if kind not in LOSS_NAMES:
        why = WHY_NOT.get(kind[0], f"trajkit has {', '.join(f'{a}/{b}' for a, b in LOSS_NAMES)}")
        raise ConfigError(f"TRL config: loss_type={kind[0]!r} with importance_sampling_level={kind[1]!r} has no "
                          f"trajkit loss; {why}")
    tree["loss.name"] = LOSS_NAMES[kind]
    tree["loss.clip_high"] = args.epsilon if args.epsilon_high is None else args.epsilon_high
    scale = args.scale_rewards
    tree["loss.scale_rewards"] = {True: "group", False: "none"}.get(scale, scale) if isinstance(scale, bool) \
        else str(scale)


def _optimizer(args, tree: dict) -> None:
    if not _name(args.optim).startswith("adamw_torch"):
        raise ConfigError(f"TRL config: optim={_name(args.optim)!r}: trajkit's AdamW is torch.optim.AdamW "
                          "(adamw_torch, adamw_torch_fused); set optim.name in trajkit's config for LoGRA or Muon")
    tree["optim.eps"] = float(args.adam_epsilon)
    if not args.max_grad_norm or args.max_grad_norm <= 0:
        raise ConfigError(f"TRL config: max_grad_norm={args.max_grad_norm}: trajkit always clips; give a "
                          "positive norm (TRL's default 1.0)")
    tree["optim.grad_clip"] = float(args.max_grad_norm)
    schedule = _name(args.lr_scheduler_type)
    if schedule not in SCHEDULES:
        raise ConfigError(f"TRL config: lr_scheduler_type={schedule!r}; trajkit has {', '.join(SCHEDULES)}")
    tree["optim.lr_schedule"] = SCHEDULES[schedule]
    tree["optim.gradient_checkpointing"] = bool(args.gradient_checkpointing or
                                                getattr(args, "activation_checkpointing", False))


def _batches(args, tree: dict) -> int:
    """Batch shape keys; returns the optimiser steps per generation batch."""
    g, rows = args.num_generations, args.generation_batch_size
    if rows % g:
        raise ConfigError(f"TRL config: generation_batch_size={rows} is not a multiple of num_generations={g}")
    if args.steps_per_generation % args.gradient_accumulation_steps:
        raise ConfigError(f"TRL config: steps_per_generation={args.steps_per_generation} is not a multiple of "
                          f"gradient_accumulation_steps={args.gradient_accumulation_steps}")
    tree["rollout.prompts_per_step"] = rows // g
    tree["optim.minibatches"] = args.steps_per_generation // args.gradient_accumulation_steps
    return tree["optim.minibatches"] * args.num_iterations


def _steps(args, tree: dict, per_generation: int, num_prompts: int | None) -> int:
    if args.max_steps and args.max_steps > 0:
        if args.max_steps % per_generation:
            raise ConfigError(f"TRL config: max_steps={args.max_steps} optimiser steps is not a multiple of the "
                              f"{per_generation} optimiser steps each generation batch makes")
        return args.max_steps // per_generation
    if num_prompts is None:
        raise ConfigError("TRL config: num_train_epochs needs the dataset's size; give train_dataset= or set "
                          "max_steps")
    return max(1, math.ceil(args.num_train_epochs * num_prompts / tree["rollout.prompts_per_step"]))


def _precision_and_logs(args, tree: dict, steps: int) -> None:
    if args.fp16 or args.bf16:
        tree["policy.dtype"] = "float16" if args.fp16 else "bfloat16"
    if args.use_cpu:
        tree["policy.device"] = "cpu"
    report = [_name(r) for r in (args.report_to or [])]
    unknown = [r for r in report if r not in REPORTERS]
    if unknown:
        raise ConfigError(f"TRL config: report_to={unknown[0]!r}; trajkit reports to {', '.join(REPORTERS)}")
    tree["log.report_to"] = [r for r in report if r != "none"]
    tree["log.save_optimizer"] = not args.save_only_model
    tree["checkpoint.every"] = _every(args, "save", steps)
    tree["eval.every"] = _every(args, "eval", steps)
    warmup = 0 if _name(args.lr_scheduler_type) == "constant" else args.warmup_steps or 0  # TRL: no warm-up
    tree["optim.warmup_steps"] = int(round(warmup * steps)) if 0 < warmup < 1 else int(warmup)


def _every(args, what: str, steps: int) -> int:
    strategy = _name(getattr(args, f"{what}_strategy"))
    if strategy == "no":
        return 0
    if strategy != "steps":
        raise ConfigError(f"TRL config: {what}_strategy={strategy!r}; trajkit {what}s every N steps ('steps') "
                          "or never ('no')")
    every = getattr(args, f"{what}_steps") or 0
    return int(round(every * steps)) if 0 < every < 1 else int(every)


def from_trl(args, num_prompts: int | None = None) -> TrainConfig:
    """A GRPOConfig (or a dict of its fields) -> the equivalent :class:`TrainConfig`; ``num_prompts``: the
    training dataset's size, needed when ``max_steps`` is unset (epochs)."""
    args = _grpo_config(args)
    _check_defaults(args)
    tree: dict[str, Any] = {key: getattr(args, name) for name, key in DIRECT.items()}
    _loss(args, tree)
    _optimizer(args, tree)
    tree["steps"] = _steps(args, tree, _batches(args, tree), num_prompts)
    _precision_and_logs(args, tree, tree["steps"])
    return from_dict(TrainConfig, _nest(tree))


def _nest(flat: dict[str, Any]) -> dict:
    out: dict = {}
    for key, value in flat.items():
        *sections, last = key.split(".")
        node = out
        for s in sections:
            node = node.setdefault(s, {})
        node[last] = value
    return out
