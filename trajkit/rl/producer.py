"""Asynchronous rollouts with bounded staleness (``rollout.mode=async``, ``rollout.max_staleness=K``).

A :class:`Producer` thread keeps generating while the trainer's thread recomputes log-probs and updates
the policy. It makes the batches in step order: batch ``s`` (the one step ``s`` trains on) takes the next
``rollout.prompts_per_step`` prompts of the stream (and a dynamic-sampling refill's), samples with the
step's own seed and is scored exactly as the synchronous step's ``generation`` stage does
(:func:`trajkit.rl.step.generate_batch`). *Admission control by capacity*: batch ``s`` may start only when
the trainer's policy version ``v`` (updates applied and pushed) satisfies ``s - v <= K``, so at most
``K + 1`` batches exist ahead of the trainer and every token of batch ``s`` was sampled by a version
``>= s - K``: the bound holds by construction and no finished work is thrown away for it. The trainer still
checks every sample (:func:`admit`) and drops a group that would exceed it (``async/dropped_stale``; zero
unless a push bypassed :meth:`trajkit.rl.rollout.Rollout.push`).

Partial rollouts: the trainer pushes new weights after each update without waiting for the producer's
episodes. A push waits only for the engine call in progress (every call holds ``Rollout.lock``); an
episode of several calls (tool turns) continues under the new weights, and each sampled token keeps the
version that sampled it (``Sample.token_versions``), so a sample's version span can exceed one. The engine's
log-probs recorded per token are the behaviour policy of the decoupled objective (``loss.decoupled``).

``K = 0`` makes batch ``s`` start after update ``s - 1`` is pushed: the synchronous trainer's order of
operations on the same seeds, bit for bit (tested). Deviations from AReaL / verl's fully async trainer:
interruption is at engine-call granularity (a weight push does not cut a generate call in the middle),
and the producer is a thread of the trainer's process (one engine), not a pool of rollout servers.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from trajkit.envs.sample import Sample
from trajkit.rl.stages import DATA, GENERATION, WEIGHT_SYNC, StageTimer
from trajkit.rl.state import TrainState
from trajkit.rl.step import StepResult, data_rows, generate_batch, learn


@dataclass
class Produced:
    """One batch from the producer: the samples (scored, advantages set) for step ``step``, the generation
    stage's metrics, the stream cursor after its prompts, the dataset rows it drew, the policy version the
    trainer had when it started, and its generation seconds (the producer's own timer)."""

    step: int
    samples: list[Sample]
    metrics: dict
    cursor: int
    rows: list[int]
    started_version: int
    timer: StageTimer = field(default_factory=StageTimer)


class ProducerError(RuntimeError):
    """The producer thread failed; the original exception is the ``__cause__``."""


class Producer:
    """Generates batch ``start, start + 1, ...`` of ``t`` in a thread, at most ``max_staleness`` versions
    ahead of :meth:`advance`'s version; :meth:`take` hands them to the trainer in order."""

    def __init__(self, t: TrainState, start: int):
        self.t, self.k = t, t.cfg.rollout.max_staleness
        self.version = start  # the trainer's policy version: updates applied and pushed
        self.next_step = start
        self.ready: dict[int, Produced] = {}
        self.error: BaseException | None = None
        self.stopping = False
        self.cond = threading.Condition()
        t.stream.committed = t.stream.cursor
        self.thread = threading.Thread(target=self._loop, name="trajkit-rollout-producer", daemon=True)
        self.thread.start()

    def _admitted(self) -> bool:
        return self.next_step - self.version <= self.k

    def _loop(self) -> None:
        try:
            while True:
                with self.cond:
                    self.cond.wait_for(lambda: self.stopping or self._admitted())
                    if self.stopping:
                        return
                    step, started = self.next_step, self.version
                produced = self._produce(step, started)
                with self.cond:
                    self.ready[step] = produced
                    self.next_step += 1
                    self.cond.notify_all()
        except BaseException as exc:  # noqa: BLE001 - handed to the trainer's thread by take()
            with self.cond:
                self.error = exc
                self.cond.notify_all()

    def _produce(self, step: int, started: int) -> Produced:
        t, timer = self.t, StageTimer()
        with timer.stage(GENERATION):
            prompts = t.stream.take(t.cfg.rollout.prompts_per_step)
            samples, metrics = generate_batch(t, prompts, timer, step)
        return Produced(step, samples, metrics, t.stream.cursor, t.stream.drain_rows(), started, timer)

    def take(self, step: int) -> Produced:
        """Batch ``step``, waiting for it; a producer failure is raised here as :class:`ProducerError`."""
        with self.cond:
            self.cond.wait_for(lambda: step in self.ready or self.error is not None or self.stopping)
            if self.error is not None:
                raise ProducerError(f"the rollout producer failed while generating batch {self.next_step}: "
                                    f"{self.error}") from self.error
            if step not in self.ready:
                raise ProducerError("the rollout producer was closed")
            return self.ready.pop(step)

    def buffered(self) -> int:
        """Batches generated and not yet taken."""
        with self.cond:
            return len(self.ready)

    def advance(self, version: int) -> None:
        """The trainer pushed the policy after ``version`` updates: admit the batches it allows."""
        with self.cond:
            self.version = version
            self.cond.notify_all()

    def close(self, timeout_s: float | None = None) -> None:
        """Stop after the batch in progress (its samples are dropped; a resumed run regenerates them)."""
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.thread.join(timeout_s)


def admit(t: TrainState, got: Produced) -> tuple[list[Sample], dict]:
    """The samples of ``got`` that step ``t.step`` may train on, and the ``async/*`` metrics.

    A sample's staleness is ``t.step`` minus the trainer step of the weights that sampled its *first* token
    (:meth:`Rollout.trained_steps` of the oldest of its ``version_span``); a group with a sample staler than
    ``rollout.max_staleness`` is dropped whole (its advantages are relative to the group)."""
    k, g = t.cfg.rollout.max_staleness, t.cfg.rollout.group_size
    ages, spans, newer = [], [], 0
    for s in got.samples:
        first, last = s.version_span
        born = t.rollout.trained_steps(first)
        ages.append(t.step - born if born >= 0 else -1)
        spans.append(t.rollout.trained_steps(last) - born if born >= 0 else 0)
        newer += sum(1 for v, m in zip(s.token_versions or [], s.loss_mask) if m and v != first)
    stale_groups = {i // g for i, a in enumerate(ages) if a > k}
    kept = [s for i, s in enumerate(got.samples) if i // g not in stale_groups]
    known = [a for a in ages if a >= 0]
    metrics = {"async/staleness_mean": sum(known) / len(known) if known else 0.0,
               "async/staleness_max": float(max(known, default=0)),
               "async/version_span_max": float(max(spans, default=0)),
               "async/version_span_tokens": float(newer),
               "async/dropped_stale": float(len(got.samples) - len(kept)),
               "async/max_staleness": float(k),
               "async/unknown_version": float(len(ages) - len(known)),
               "async/started_version": float(got.started_version),
               "async/generate_s": got.timer.seconds[GENERATION]}
    metrics.update({f"time/{key}": v for key, v in got.timer.sub.items()})
    if not kept:
        raise ProducerError(f"step {t.step}: every group of the batch was staler than rollout.max_staleness={k} "
                            "(a weight push outside Rollout.push?)")
    return kept, metrics


def async_step(t: TrainState, producer: Producer) -> StepResult:
    """One asynchronous step: the stages time the trainer's own thread, so ``time/step`` is this step's wall
    time. ``data``: waiting for batch ``t.step`` (``async/buffer_wait_s``); ``generation``: admitting it
    (the producer's generation seconds are ``async/generate_s``, overlapped with earlier steps);
    ``logprob``, ``policy_update``: as in the synchronous step; ``weight_sync``: the push after the update,
    which waits only for an engine call in progress."""
    timer, metrics = StageTimer(), {}
    with timer.stage(DATA):
        buffered = producer.buffered()
        got = producer.take(t.step)
    with timer.stage(GENERATION):
        samples, admitted = admit(t, got)
        metrics.update(got.metrics, **admitted, **{"async/buffered": float(buffered)})
    metrics.update(learn(t, samples, timer, alarm=admitted["async/staleness_max"] == 0))
    t.step += 1
    t.stream.committed = got.cursor  # every prompt before it is trained: what a checkpoint saves
    with timer.stage(WEIGHT_SYNC):
        t.rollout.push(t.learner, t.step)
        producer.advance(t.step)
    metrics.update(timer.to_dict())
    metrics["async/buffer_wait_s"] = timer.seconds[DATA]
    metrics.update(data_rows(t, got.rows))
    return StepResult(t.step, samples, metrics, timer)
