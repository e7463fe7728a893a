"""One synchronous RL step in five timed stages (names in :mod:`trajkit.rl.stages`).

    data         take P prompts from the stream (uniform, or by difficulty: :mod:`trajkit.rl.sampler`, which
                 sees every group's rewards); repeat each G times (a group)
    weight_sync  policy -> the engine's inference copy; trained draft -> the drafter's copy
    generation   the environment runs episodes through the engine (speculative or plain); the samples
                 are validated; rewards (sub-timer ``generation/reward``), length shaping and group
                 advantages; with ``rollout.dynamic_sampling``, groups without signal are dropped and
                 refilled from the stream (:mod:`trajkit.rl.dynamic`)
    logprob      recompute the policy's (and the reference's) log-probs on the rollout tokens; compare
                 with the engine's (mismatch alarm); when the update is one optimiser step, its own forward
                 gives the old log-probs and the policy forward here is skipped (:mod:`trajkit.rl.learner`)
    policy_update  clipped policy-gradient loss, backward, AdamW step; draft distillation if enabled

The last two stages (and the weight push) run through ``t.learner`` (:mod:`trajkit.rl.learner`): the
policy in this process, or a Ray policy worker under :mod:`trajkit.cluster`, with this same function as
the controller's step.

This is GRPO's outer loop (Shao et al. 2024) as NeMo RL runs it synchronously; the loss is pluggable
(:mod:`trajkit.rl.losses`). ``rollout.mode=async`` runs the generation stage's work
(:func:`generate_batch`) in a producer thread instead and the rest here (:mod:`trajkit.rl.producer`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from trajkit.engine import SamplingParams
from trajkit.models.chat import stop_token_ids
from trajkit.rl.batching import collate
from trajkit.rl.dynamic import Collected, collect_groups, round_seed
from trajkit.rl.mismatch import MISMATCH_KEYS
from trajkit.envs.sample import Sample, validate_sample
from trajkit.rl.scoring import check_env_failures, score, shape_rewards
from trajkit.rl.shaping import random_rewards
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


def _generate(t: TrainState, prompts, timer: StageTimer, step: int, client=None) -> Collected:
    """The generation stage's rounds for the batch trained at ``step``: episodes, validation, rewards;
    dynamic sampling when configured. ``client``: the batch's own (:meth:`Rollout.batch_client`)."""
    cfg, g = t.cfg, t.cfg.rollout.group_size
    seed = step_seed(cfg.seed, step)
    reward_metrics: list[tuple[int, dict]] = []  # (rows, the reward functions' metrics) per round

    def run_round(round_prompts, r: int):
        rows = [p for p in round_prompts for _ in range(g)]
        params = rollout_params(cfg, round_seed(seed, r), stop_token_ids(t.tokenizer))
        samples = t.rollout.run(t.task, rows, g, params, keep_calls=r > 0, client=client)
        for i, s in enumerate(samples):
            validate_sample(s, i)
        with timer.substage(GENERATION, REWARD):
            rewards, per = t.rewards(samples)
        t.stream.observe([p.index for p in round_prompts], rewards, g)  # the difficulty sampler's estimates
        if cfg.shaping.control == "random":  # the spurious-reward control: the task's rewards stay in `per`
            rewards = random_rewards(len(samples), round_seed(seed, r))
        reward_metrics.append((len(samples), per))
        return samples, rewards

    if not cfg.rollout.dynamic_sampling:
        samples, rewards = run_round(prompts, 0)
        got = Collected(samples, rewards, samples, rewards)
        got.metrics.update(_mean_over_rounds(reward_metrics))
        return got

    def shape(samples, rewards):
        lengths = torch.tensor([s.num_model_tokens for s in samples])
        return shape_rewards(torch.tensor(rewards, dtype=torch.float32), lengths, cfg)
    got = collect_groups(prompts, g, run_round, shape, t.stream.take, cfg.rollout.max_refill_rounds)
    got.metrics.update(_mean_over_rounds(reward_metrics))
    return got


def _mean_over_rounds(rounds: list[tuple[int, dict]]) -> dict:
    """The reward functions' metrics over every generated row: round means weighted by rows (a NaN mean,
    a function that scored nothing in a round, is left out)."""
    out: dict[str, float] = {}
    for key in {k for _, m in rounds for k in m}:
        parts = [(n, m[key]) for n, m in rounds if key in m and not math.isnan(m[key])]
        total = sum(n for n, _ in parts)
        out[key] = sum(n * v for n, v in parts) / total if total else math.nan
    return out


def generate_batch(t: TrainState, prompts, timer: StageTimer, step: int,
                   client=None) -> tuple[list[Sample], dict]:
    """The generation stage's work for the batch trained at ``step``: episodes, rewards, advantages (set on
    the samples) -> (the samples to train on, their metrics). The synchronous step runs it in its
    ``generation`` stage; the asynchronous producer (:mod:`trajkit.rl.producer`) in its own threads, a
    batch through its own ``client`` (:meth:`Rollout.batch_client`) when several are in flight."""
    got = _generate(t, prompts, timer, step, client)
    _, scores = score(got.seen_samples, got.seen_rewards, t.cfg)  # metrics over every generated row
    check_env_failures(got.seen_samples, t.cfg, step)
    return got.samples, {**scores, **got.metrics, **t.rollout.metrics(client)}


def learn(t: TrainState, samples: list[Sample], timer: StageTimer, alarm: bool = True) -> dict:
    """The ``logprob`` and ``policy_update`` stages on ``samples`` (advantages set) -> their metrics;
    ``alarm``: check the mismatch alarm (an asynchronous step's stale samples differ from the policy by
    design, so it checks only a batch sampled by the current weights)."""
    metrics = {}
    advantages = torch.tensor([s.advantage for s in samples], dtype=torch.float32)
    with timer.stage(LOGPROB):
        batch = collate(samples, advantages, t.tokenizer.pad_token_id)
        gap = t.learner.logprobs(batch, t.step)
    with timer.stage(POLICY_UPDATE):
        updated = t.learner.update(t.step)
    if gap is None:  # the update's own forward scored the old log-probs (Learner.logprobs)
        gap = {k: updated.pop(f"mismatch/{k}") for k in MISMATCH_KEYS}
    metrics.update({f"mismatch/{k}": v for k, v in gap.items()})
    metrics["mismatch/alarm"] = float(t.alarm.check(gap, t.step + 1)) if alarm else 0.0
    metrics.update(updated)
    return metrics


def data_rows(t: TrainState, rows: list[int]) -> dict:
    """The dataset rows a step drew (refills included), for ``trajkit audit run``."""
    return {"data/rows": rows, "data/num_rows": t.task.num_prompts("train")} if rows else {}


def rl_step(t: TrainState) -> StepResult:
    """Run one step on ``t`` and advance its step counter."""
    cfg, timer, metrics = t.cfg, StageTimer(), {}
    with timer.stage(DATA):
        prompts = t.stream.take(cfg.rollout.prompts_per_step)
    with timer.stage(WEIGHT_SYNC):
        t.rollout.push(t.learner, t.step)
    with timer.stage(GENERATION):
        samples, generated = generate_batch(t, prompts, timer, t.step)
        metrics.update(generated)
    metrics.update(learn(t, samples, timer))
    t.step += 1
    metrics.update(timer.to_dict())
    metrics.update(data_rows(t, t.stream.drain_rows()))
    metrics.update(t.stream.metrics())
    return StepResult(t.step, samples, metrics, timer)
