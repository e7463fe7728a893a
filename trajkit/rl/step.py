"""One synchronous RL step in five timed stages (names in :mod:`trajkit.rl.stages`).

    data         take P prompts from the stream; repeat each G times (a group)
    weight_sync  policy -> the engine's inference copy; trained draft -> the drafter's copy
    generation   the environment runs episodes through the engine (speculative or plain); the samples
                 are validated; rewards (sub-timer ``generation/reward``), length shaping and group
                 advantages
    logprob      recompute the policy's (and the reference's) log-probs on the rollout tokens; compare
                 with the engine's (mismatch alarm)
    policy_update  clipped policy-gradient loss, backward, AdamW step; draft distillation if enabled

This is GRPO's outer loop (Shao et al. 2024) as NeMo RL runs it synchronously; the loss is pluggable
(:mod:`trajkit.rl.losses`).
"""
from __future__ import annotations

from dataclasses import dataclass

from trajkit.engine import SamplingParams
from trajkit.models.chat import stop_token_ids
from trajkit.rl.batching import batch_logprobs, collate
from trajkit.rl.mismatch import mismatch_metrics
from trajkit.rl.sample import Sample, validate_sample
from trajkit.rl.scoring import score
from trajkit.rl.stages import (
    DATA,
    GENERATION,
    LOGPROB,
    POLICY_UPDATE,
    REWARD,
    WEIGHT_SYNC,
    StageTimer,
)
from trajkit.rl.state import TrainState
from trajkit.rl.update import distill_draft, update_policy


@dataclass
class StepResult:
    step: int
    samples: list[Sample]
    metrics: dict
    timer: StageTimer


def rollout_params(cfg, seed: int, stop_ids: tuple[int, ...], temperature: float | None = None) -> SamplingParams:
    """Pure temperature sampling (top-k/top-p off, so engine and policy log-probs are comparable), stopping
    on the tokenizer's end-of-turn ids."""
    return SamplingParams(temperature=cfg.rollout.temperature if temperature is None else temperature,
                          max_new_tokens=cfg.rollout.max_new_tokens, stop_token_ids=stop_ids, seed=seed)


def step_seed(seed: int, step: int) -> int:
    return seed * 1_000_003 + step


def rl_step(t: TrainState) -> StepResult:
    """Run one step on ``t`` and advance its step counter."""
    cfg, timer, metrics = t.cfg, StageTimer(), {}
    with timer.stage(DATA):
        prompts = t.stream.take(cfg.rollout.prompts_per_step)
        rows = [p for p in prompts for _ in range(cfg.rollout.group_size)]
    with timer.stage(WEIGHT_SYNC):
        t.rollout.sync(t.policy, t.draft)
    with timer.stage(GENERATION):
        params = rollout_params(cfg, step_seed(cfg.seed, t.step), stop_token_ids(t.tokenizer))
        samples = t.rollout.run(t.task, rows, cfg.rollout.group_size, params)
        for i, s in enumerate(samples):
            validate_sample(s, i)
        with timer.substage(GENERATION, REWARD):
            rewards, reward_metrics = t.rewards(samples)
        advantages, scores = score(samples, rewards, cfg)
        metrics.update(scores, **reward_metrics, **t.rollout.metrics())
    with timer.stage(LOGPROB):
        batch = collate(samples, advantages, t.tokenizer.pad_token_id)
        distill = t.draft_optimizer is not None and (t.step + 1) % cfg.draft.distill_every == 0
        old_logp, dists = batch_logprobs(t.policy, batch, cfg.rollout.temperature, cfg.optim.micro_batch_size,
                                         keep_dists=distill)
        ref_logp = None
        if t.reference is not None:
            ref_logp, _ = batch_logprobs(t.reference, batch, cfg.rollout.temperature, cfg.optim.micro_batch_size)
        gap = mismatch_metrics(batch.engine_logp, old_logp, batch.mask)
        metrics.update({f"mismatch/{k}": v for k, v in gap.items()})
        metrics["mismatch/alarm"] = float(t.alarm.check(gap, t.step + 1))
    with timer.stage(POLICY_UPDATE):
        metrics.update(update_policy(t.policy, t.optimizer, batch, old_logp, ref_logp, cfg))
        if distill:
            metrics.update(distill_draft(t.draft, t.draft_optimizer, batch, dists, cfg))
    t.step += 1
    metrics.update(timer.to_dict())
    return StepResult(t.step, samples, metrics, timer)
