"""The batching scheduler: one thread owns the engine; requests that wait together run together.

A request is a job of ``n`` rows (one prompt, ``n`` sets of sampling parameters). The scheduler thread takes
the first waiting job, keeps collecting jobs for up to ``batch_wait_ms`` (or until ``max_batch`` rows), and
runs them all in ONE ``Engine.generate`` call with one ``SamplingParams`` per row: each row has its own
random stream, stop tokens and budget, and a finished row leaves the batch (``ActiveBatch.drop``).

Deviation from continuous batching as vLLM does it: a request that arrives while a call is running waits for
that call to end, rather than joining the running batch (the engine's ``ActiveBatch`` can drop rows but not
add them). Under steady load this costs up to one call's latency per request; the gateway benchmark
(``trajkit bench gateway``) measures what it gives.

Weight updates go through :meth:`Scheduler.update_weights`, which takes the engine lock: it waits for the
running call to finish (in-flight rows drain) and every later call samples with the new weights, so each
record's ``policy_version`` is the version of the weights that sampled all of its tokens.
"""
from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from trajkit.engine import SamplingParams
from trajkit.engine.types import Completion


@dataclass
class Job:
    prompt_ids: list[int]
    params: list[SamplingParams]  # one per row (choice)
    future: Future = field(default_factory=Future)
    submitted: float = field(default_factory=time.perf_counter)


@dataclass
class JobResult:
    completions: list[Completion]
    policy_version: int
    queued_s: float  # submitted -> its engine call started
    generate_s: float  # the engine call it ran in
    batch_rows: int  # rows of that call


class Scheduler:
    """Owns ``engine``; :meth:`submit` from any thread, results through ``concurrent.futures.Future``."""

    def __init__(self, engine, max_batch: int = 64, batch_wait_s: float = 0.005, lock=None):
        self.engine, self.max_batch, self.batch_wait_s = engine, max_batch, batch_wait_s
        # held for every engine call and every weight update; an RL trainer passes the lock its own weight
        # sync holds, so a sync waits for the running call (trajkit.rl.agent)
        self.lock = lock if lock is not None else threading.Lock()
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._idle = threading.Condition()
        self._pending = 0
        self.calls = 0
        self._thread = threading.Thread(target=self._loop, name="trajkit-gateway-scheduler", daemon=True)
        self._thread.start()

    def submit(self, prompt_ids: list[int], params: list[SamplingParams]) -> Future:
        job = Job(list(prompt_ids), list(params))
        with self._idle:
            self._pending += 1
        self._queue.put(job)
        return job.future

    def update_weights(self, state_dict) -> int:
        """Load new weights between engine calls (the running call drains first); the new version."""
        with self.lock:
            return self.engine.update_weights(state_dict)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until no job is queued or running; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _collect(self, first: Job) -> list[Job]:
        jobs, rows = [first], len(first.params)
        deadline = time.perf_counter() + self.batch_wait_s
        while rows < self.max_batch:
            try:
                job = self._queue.get(timeout=max(0.0, deadline - time.perf_counter()))
            except queue.Empty:
                break
            if job is None:
                self._queue.put(None)
                break
            jobs.append(job)
            rows += len(job.params)
        return jobs

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            jobs = self._collect(first)
            try:
                self._run(jobs)
            finally:
                with self._idle:
                    self._pending -= len(jobs)
                    self._idle.notify_all()

    def _run(self, jobs: list[Job]) -> None:
        prompts = [j.prompt_ids for j in jobs for _ in j.params]
        params = [p for j in jobs for p in j.params]
        with self.lock:
            start = time.perf_counter()
            version = self.engine.policy_version
            try:
                out = self.engine.generate(prompts, params)
            except Exception as exc:  # noqa: BLE001 - handed to the waiting request, never kills the loop
                if len(jobs) == 1:
                    jobs[0].future.set_exception(exc)
                    return
                out = None
            self.calls += 1
        if out is None:  # one job broke the shared call: run each alone so only that one fails
            for j in jobs:
                self._run([j])
            return
        seconds = time.perf_counter() - start
        at = 0
        for j in jobs:
            rows = list(out[at:at + len(j.params)])
            at += len(j.params)
            j.future.set_result(JobResult(rows, version, start - j.submitted, seconds, len(prompts)))
