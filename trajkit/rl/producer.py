"""Asynchronous rollouts with bounded staleness (``rollout.mode=async``, ``rollout.max_staleness=K``).

A :class:`Producer` keeps generating while the trainer's thread recomputes log-probs and updates the
policy. It starts the batches in step order: batch ``s`` (the one step ``s`` trains on) takes the next
``rollout.prompts_per_step`` prompts of the stream, samples with the step's own seed and is scored exactly
as the synchronous step's ``generation`` stage does (:func:`trajkit.rl.step.generate_batch`).
*Admission control by capacity*: batch ``s`` may start only when the trainer's policy version ``v``
(updates applied and pushed) satisfies ``s - v <= K``, so at most ``K + 1`` batches exist ahead of the
trainer and every token of batch ``s`` was sampled by a version ``>= s - K``: the bound holds by
construction and no finished work is thrown away for it. The trainer still checks every sample
(:func:`admit`) and drops a group that would exceed it (``async/dropped_stale``; zero unless a push
bypassed :meth:`trajkit.rl.rollout.Rollout.push`).

*Batches overlap.* Each admitted batch runs in a thread of its own, so up to ``K + 1`` batches' episodes
are in flight at once: batch ``s + 1`` starts as soon as admission allows, while batch ``s``'s stragglers
still run (a synchronous step, and a producer making one batch at a time, waits for each batch's slowest
episode before the next begins). Within a batch the environment runs the episodes concurrently (one
batched engine call per turn; a latency or tool wait per episode, the batch's longest). Engine calls of
different batches take turns on the one engine under ``Rollout.lock``; a wait (tool call, sandbox, the
latency env's sleep) happens outside it. Each batch has its own client (:meth:`Rollout.batch_client`:
its calls and versions), made on the trainer's thread in step order as admission allows (with the round
number an environment that numbers its rounds reserves for it: a gateway environment's session ids
``run-ROUND-I``; their calls' seeds come from the round's seed and the row), draws its prompts in the
producer's loop thread in step order, and keeps its per-row seeds, so a sample does not depend on the
interleaving, only on the weights that sampled it.
The trainer takes the batches in step order (:meth:`Producer.take`): the stream's committed cursor stays
exact for resume. One batch at a time instead (:func:`batches_in_flight`) when dynamic sampling refills
a batch from the stream (a later batch's prompts would depend on the timing) or the environment does not
declare ``concurrent_rollouts`` (the single-turn, tool and gateway environments do; the gateway ones share
one gateway, each round waiting for its own requests: :mod:`trajkit.envs.agent`).

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
from trajkit.rl.rollout import CountingClient
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


def batches_in_flight(t: TrainState) -> int:
    """How many batches the producer may generate at once: ``K + 1`` (every batch admission allows), or 1
    when a batch's refills draw from the stream (``rollout.dynamic_sampling``: a later batch's prompts would
    depend on the timing) or the environment's ``rollout`` is not safe to run from two threads at once
    (an environment says it is with ``concurrent_rollouts = True``)."""
    cfg = t.cfg.rollout
    if cfg.dynamic_sampling or not getattr(t.task.env, "concurrent_rollouts", False):
        return 1
    return cfg.max_staleness + 1


class Producer:
    """Generates batch ``start, start + 1, ...`` of ``t``, at most ``max_staleness`` versions ahead of
    :meth:`advance`'s version and up to :func:`batches_in_flight` of them at once, each in a thread of its
    own; :meth:`take` hands them to the trainer in step order."""

    def __init__(self, t: TrainState, start: int):
        self.t, self.k = t, t.cfg.rollout.max_staleness
        self.limit = batches_in_flight(t)
        self.version = start  # the trainer's policy version: updates applied and pushed
        self.next_step = start
        self.in_flight: dict[int, threading.Thread] = {}
        # each batch's own client, made on the trainer's thread (_reserve); none with dynamic sampling, whose
        # refill rounds run through the rollout's client one batch at a time
        self.own_clients = not t.cfg.rollout.dynamic_sampling
        self.clients: dict[int, CountingClient] = {}
        self.reserved = start  # the first step without a client yet
        self.most_in_flight = 0  # the most batches generating at once so far (async/in_flight_max)
        self.ready: dict[int, Produced] = {}
        self.error: BaseException | None = None
        self.failed_step: int | None = None
        self.stopping = False
        self.cond = threading.Condition()
        t.stream.committed = t.stream.cursor
        self._reserve()
        self.thread = threading.Thread(target=self._loop, name="trajkit-rollout-producer", daemon=True)
        self.thread.start()

    def _reserve(self) -> None:
        """Make the clients of the batches the trainer's version admits, in step order, on the trainer's thread
        (the constructor and :meth:`advance`): an environment that numbers its rounds (a gateway environment:
        session ids ``run-ROUND-I``) gets each batch's round number here, so it depends on the step and the
        trainer's schedule (its evaluations number their rounds from the same counter), never on the timing of
        the batches' threads. The calls' seeds do not depend on it (the round's seed and the row give them)."""
        if not self.own_clients:
            return
        number = getattr(self.t.task.env, "next_round", None)
        while self.reserved <= self.version + self.k:
            self.clients[self.reserved] = self.t.rollout.batch_client(number() if number is not None else None)
            self.reserved += 1

    def _admitted(self) -> bool:
        return self.next_step - self.version <= self.k and len(self.in_flight) < self.limit

    def _loop(self) -> None:
        """Start each batch as soon as admission allows, in step order; its prompts are drawn here, so the
        stream is read by one thread in step order whatever the batches' timing."""
        try:
            while True:
                with self.cond:
                    self.cond.wait_for(lambda: self.stopping or self.error is not None or self._admitted())
                    if self.stopping or self.error is not None:
                        return
                    step, started = self.next_step, self.version
                    prompts = self.t.stream.take(self.t.cfg.rollout.prompts_per_step)
                    cursor, rows = self.t.stream.cursor, self.t.stream.drain_rows()
                    client = self.clients.pop(step, None)
                    worker = threading.Thread(target=self._batch, args=(step, started, prompts, cursor, rows, client),
                                              name=f"trajkit-rollout-batch-{step}", daemon=True)
                    self.in_flight[step] = worker
                    self.most_in_flight = max(self.most_in_flight, len(self.in_flight))
                    self.next_step += 1
                worker.start()
        except BaseException as exc:  # noqa: BLE001 - handed to the trainer's thread by take()
            self._failed(exc)

    def _batch(self, step: int, started: int, prompts, cursor: int, rows: list[int], client) -> None:
        """Generate batch ``step`` (a thread of its own) through ``client`` (its own, :meth:`_reserve`; None:
        the rollout's, with dynamic sampling). One batch at a time (``limit`` 1) reads the stream's cursor
        after its refills."""
        try:
            t, timer = self.t, StageTimer()
            with timer.stage(GENERATION):
                samples, metrics = generate_batch(t, prompts, timer, step, client)
            if self.limit == 1:  # dynamic sampling's refills drew from the stream too
                cursor, rows = t.stream.cursor, rows + t.stream.drain_rows()
            produced = Produced(step, samples, metrics, cursor, rows, started, timer)
            with self.cond:
                self.ready[step] = produced
                del self.in_flight[step]
                self.cond.notify_all()
        except BaseException as exc:  # noqa: BLE001
            self._failed(exc, step)

    def _failed(self, exc: BaseException, step: int | None = None) -> None:
        with self.cond:
            if self.error is None:
                self.error, self.failed_step = exc, step
            self.in_flight.pop(step, None)
            self.cond.notify_all()

    def take(self, step: int) -> Produced:
        """Batch ``step``, waiting for it; a producer failure is raised here as :class:`ProducerError` (a later
        batch's failure once batch ``step`` is no longer generating: an earlier batch still trains)."""
        with self.cond:
            self.cond.wait_for(lambda: step in self.ready or self.stopping or
                               (self.error is not None and step not in self.in_flight))
            if step in self.ready:
                return self.ready.pop(step)
            if self.error is not None:
                which = self.next_step if self.failed_step is None else self.failed_step
                raise ProducerError(f"the rollout producer failed while generating batch {which}: "
                                    f"{self.error}") from self.error
            raise ProducerError("the rollout producer was closed")

    def buffered(self) -> int:
        """Batches generated and not yet taken."""
        with self.cond:
            return len(self.ready)

    def generating(self) -> int:
        """Batches being generated now."""
        with self.cond:
            return len(self.in_flight)

    def advance(self, version: int) -> None:
        """The trainer pushed the policy after ``version`` updates: admit the batches it allows."""
        with self.cond:
            self.version = version
            self._reserve()
            self.cond.notify_all()

    def close(self, timeout_s: float | None = None) -> None:
        """Stop after the batches in progress (their samples are dropped; a resumed run regenerates them)."""
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.thread.join(timeout_s)
        with self.cond:
            workers = list(self.in_flight.values())
        for worker in workers:
            if worker.ident is not None:  # started (the loop starts every worker it registers)
                worker.join(timeout_s)


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
        buffered, generating = producer.buffered(), producer.generating()
        got = producer.take(t.step)
    with timer.stage(GENERATION):
        samples, admitted = admit(t, got)
        metrics.update(got.metrics, **admitted, **{"async/buffered": float(buffered),
                                                   "async/in_flight": float(generating),
                                                   "async/in_flight_max": float(producer.most_in_flight)})
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
