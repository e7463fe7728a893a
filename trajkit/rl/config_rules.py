"""The rules between sections of a run's config: each a small function named after what it refuses, each
raising a :class:`ConfigError` that names the keys and what to set (a setting that is only not read is a warning
instead, as :mod:`trajkit.config` warns of one). :class:`trajkit.rl.config.TrainConfig` runs
:data:`RULES` in order after every section validated itself (a rule sees only well-formed sections)."""
from __future__ import annotations

import logging
import weakref
from typing import Any, Callable

from trajkit.envs.imports import is_import_path
from trajkit.errors import ConfigError

TrainConfig = Any  # a trajkit.rl.config.TrainConfig (not imported: that module imports this one)
_log = logging.getLogger("trajkit.config")  # the config loader's logger: a key read nowhere is its warning


def rewards_are_import_paths(cfg: TrainConfig) -> None:
    for i, r in enumerate(cfg.rewards):
        if not is_import_path(r):
            raise ConfigError(f"rewards[{i}]: {r!r} is not an import path; write 'package.module:function'")
    if cfg.rewards and cfg.reward_weights is not None and len(cfg.reward_weights) != len(cfg.rewards):
        raise ConfigError(f"reward_weights: {len(cfg.reward_weights)} weights for {len(cfg.rewards)} rewards")


def overlong_buffer_within_completions(cfg: TrainConfig) -> None:
    if cfg.shaping.overlong_buffer > cfg.rollout.max_new_tokens:
        raise ConfigError("shaping.overlong_buffer must be <= rollout.max_new_tokens")


def nccl_transfer_is_vllms(cfg: TrainConfig) -> None:
    if cfg.cluster.weight_transfer == "nccl" and cfg.rollout.backend != "vllm":
        raise ConfigError("cluster.weight_transfer=nccl is vLLM's transfer: set rollout.backend=vllm, or use "
                          "cluster.weight_transfer=object_store")


def lora_combinations(cfg: TrainConfig) -> None:
    """What LoRA (``policy.lora.rank`` > 0) does not combine with yet, each refused naming the key."""
    if not cfg.policy.lora.rank:
        return
    if cfg.optim.name != "adamw":
        raise ConfigError(f"policy.lora with optim.name={cfg.optim.name}: the adapters train with AdamW; set "
                          "optim.name=adamw (or policy.lora.rank=0 for full weights)")
    if cfg.rollout.backend == "vllm" and "unembed" in cfg.policy.lora.targets:
        raise ConfigError("policy.lora.targets with unembed and rollout.backend=vllm: vLLM's LoRA on the output "
                          "layer is not tested; drop unembed from policy.lora.targets or set rollout.backend=trajkit")
    if cfg.rollout.backend == "vllm" and cfg.draft.kind != "none":
        raise ConfigError(f"policy.lora with rollout.backend=vllm and draft.kind={cfg.draft.kind}: vLLM's "
                          "speculation with a LoRA adapter is not tested; set draft.kind=none")
    if cfg.cluster.ray:
        raise ConfigError("policy.lora with cluster.ray=true: the Ray policy worker ships full state dicts; set "
                          "cluster.ray=false")
    if cfg.draft.kind == "eagle":
        raise ConfigError("policy.lora with draft.kind=eagle: the head binds to the full policy's layers; choose "
                          "another draft.kind")
    if cfg.policy.fsdp:
        raise ConfigError("policy.lora with policy.fsdp=true: sharded adapters are not built; set policy.fsdp=false "
                          "(LoRA's optimiser state is small) or policy.lora.rank=0")


def logra_not_in_float16(cfg: TrainConfig) -> None:
    if cfg.optim.name == "logra" and cfg.policy.dtype == "float16":
        raise ConfigError("optim.name=logra with policy.dtype=float16: the loss scaler unscales and checks "
                          "only .grad tensors, not LoGRA's sketches; use policy.dtype=bfloat16 (no loss "
                          "scaling needed) or float32")


def sharding_settings(cfg: TrainConfig) -> None:
    if cfg.policy.fsdp:
        from trajkit.rl.fsdp import check_config

        check_config(cfg)
    elif cfg.cluster.policy_workers > 1:
        raise ConfigError(f"cluster.policy_workers={cfg.cluster.policy_workers} shards the policy over the "
                          "policy workers: set policy.fsdp=true (or cluster.policy_workers=1)")


def async_where_a_producer_runs(cfg: TrainConfig) -> None:
    if cfg.rollout.mode == "async" and cfg.policy.fsdp and not cfg.cluster.ray:
        raise ConfigError("rollout.mode=async under torchrun (policy.fsdp=true): every rank runs the step in "
                          "lockstep and there is no producer thread; use rollout.mode=sync, or cluster.ray=true")


# the sampler sections already warned about: ``dataclasses.replace`` of a config (the Trainer setting
# ``policy.path``) validates it again around the same section, which would say the same warnings twice
_SAID_IGNORED: set[int] = set()


def sampler_settings(cfg: TrainConfig) -> None:
    """The ``sampler`` section is the difficulty sampler's: with ``rollout.sampler=uniform`` its settings are not
    read, and each one changed from its default is named in a warning (as a key another task kind reads), so that
    a packaged config that draws by difficulty runs the uniform ablation with one override. Where the difficulty
    sampler does not run yet, refused."""
    import dataclasses

    from trajkit.rl.sampler_config import SamplerConfig

    if cfg.rollout.sampler == "uniform":
        if id(cfg.sampler) in _SAID_IGNORED:  # a config rebuilt around the same section (Trainer(model=str))
            return
        _SAID_IGNORED.add(id(cfg.sampler))
        weakref.finalize(cfg.sampler, _SAID_IGNORED.discard, id(cfg.sampler))
        for f in dataclasses.fields(SamplerConfig):
            if getattr(cfg.sampler, f.name) != f.default:
                _log.warning(
                    "sampler.%s is a setting of the difficulty sampler, not read with rollout.sampler=uniform; "
                    "ignored", f.name)
        return
    if cfg.rollout.mode == "async":
        raise ConfigError("rollout.sampler=difficulty with rollout.mode=async: the producer draws batches ahead "
                          "of the updates whose groups the estimates come from, which is not built yet; set "
                          "rollout.mode=sync (or rollout.sampler=uniform)")
    if cfg.cluster.ray or cfg.policy.fsdp:
        key = "cluster.ray" if cfg.cluster.ray else "policy.fsdp"
        raise ConfigError(f"rollout.sampler=difficulty with {key}=true: that trainer builds the uniform stream; "
                          f"set {key}=false (or rollout.sampler=uniform)")


def distillation_combinations(cfg: TrainConfig) -> None:
    """What on-policy distillation (``distill.teacher``, :mod:`trajkit.rl.distill`) does not combine with,
    each refused naming the key."""
    if cfg.distill.teacher is None:
        return
    from trajkit.rl.losses import LOSSES

    if LOSSES[cfg.loss.name].sequence_ratio:
        takes = sorted(k for k, v in LOSSES.items() if not v.sequence_ratio)
        raise ConfigError(f"distill.teacher with loss.name={cfg.loss.name}: the teacher's signal is per token (an "
                          f"advantage, or a divergence at each position), and {cfg.loss.name} has one ratio per "
                          f"sequence; set loss.name to one of "
                          f"{', '.join(takes)}")
    if cfg.policy.fsdp:
        raise ConfigError("distill.teacher with policy.fsdp=true: the sharded learner does not load a teacher; "
                          "set policy.fsdp=false (or drop distill.teacher)")
    if cfg.distill.divergence != "sampled" and cfg.optim.logits_chunk:
        raise ConfigError(f"distill.divergence={cfg.distill.divergence} with optim.logits_chunk="
                          f"{cfg.optim.logits_chunk}: the divergence reads the student's whole distribution at each "
                          "sampled position, which the chunked log-probs never hold; set optim.logits_chunk=0 (or "
                          "distill.divergence=sampled)")
    if cfg.rollout.dynamic_sampling and cfg.distill.reward_coef == 0:
        raise ConfigError("rollout.dynamic_sampling with distill.teacher and distill.reward_coef=0: it drops groups "
                          "whose rewards are all equal, but every token carries the teacher's signal; set "
                          "rollout.dynamic_sampling=false (or mix in the reward with distill.reward_coef > 0)")


RULES: tuple[Callable[[TrainConfig], None], ...] = (
    rewards_are_import_paths, overlong_buffer_within_completions, nccl_transfer_is_vllms, lora_combinations,
    logra_not_in_float16, sharding_settings, async_where_a_producer_runs, sampler_settings,
    distillation_combinations)
