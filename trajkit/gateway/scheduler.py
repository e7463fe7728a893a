"""The batching scheduler: one thread owns the engine and runs continuous batching over it.

A request is a job of ``n`` rows (one prompt, ``n`` sets of sampling parameters). The scheduler thread
keeps one running batch (:class:`trajkit.engine.session.DecodeSession`): between two decode steps it
admits the waiting jobs (up to ``max_batch`` active rows) — a request joins the running batch at the
next step rather than waiting for it to end — and after each step it hands every row's new token to the
job's ``on_tokens`` callback (streaming) and resolves a job's future once all its rows finished (they
leave the batch at once). Admission is coalesced so that prefills are not one request each: into an empty
batch at once (an idle scheduler first waits ``batch_wait_s`` for others to share the prefill), into a
running one once the oldest waiting job has waited ``batch_wait_s`` or the batch would fill. Each row has
its own random stream, stop tokens and budget, so its tokens do not depend on the rows around it.

With a drafter the session decodes in speculative rounds (:class:`trajkit.engine.session.SpeculativeSession`:
each step gives a row 1 to k + 1 tokens), so requests join and leave a speculative batch the same way.
With ``continuous=False``, or an engine stand-in with only ``generate``, the scheduler collects and
batches whole ``Engine.generate`` calls instead (a request that arrives during a call waits for it to end).

If the scheduler thread dies (an error outside a single engine call: the engine cannot open a session, a
bug), every queued, held and running job fails with :class:`SchedulerDied` holding the thread's traceback,
and so does every later :meth:`Scheduler.submit`: a waiting request gets an error at once instead of hanging.

Weight updates: the scheduler holds the backend lock from the moment an idle batch admits rows until the
batch is empty again, so a weight load (:meth:`Scheduler.update_weights`, or a trainer holding the same
lock) happens only when no row is in flight, and each record's ``policy_version`` is the version of the
weights that sampled all of its tokens. ``update_weights`` also stops admission while it waits, so the
running rows drain and a steady stream of requests cannot starve it.

Owners: a job may carry a ``tag`` (who it is for: an RL round's number, :mod:`trajkit.envs.agent`).
:meth:`Scheduler.drain` can wait for one tag's jobs only, and a backend that declares ``serves``
(:class:`trajkit.backends.base.Capabilities`) is told ``serves(tags)``, on the scheduler thread, whose rows each
backend call computes: before a whole ``generate`` call, and after
each admission into a step-wise session (so it can count the call's work for the rounds it serves).
"""
from __future__ import annotations

import queue
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from trajkit.backends.registry import as_backend
from trajkit.engine import SamplingParams
from trajkit.engine.types import Completion

_EVERY = object()  # drain(): every job, whatever its tag
OnTokens = Callable[[int, list[int]], None]  # (choice index, new token ids), called on the scheduler thread


class SchedulerDied(RuntimeError):
    """The scheduler thread stopped on an error; ``str()`` ends with its traceback."""


@dataclass
class Job:
    prompt_ids: list[int]
    params: list[SamplingParams]  # one per row (choice)
    on_tokens: OnTokens | None = None
    future: Future = field(default_factory=Future)
    submitted: float = field(default_factory=time.perf_counter)
    # continuous batching: the session's row id of each choice, finished choices, admission time and rows
    rows: list[int] = field(default_factory=list)
    done: dict[int, Completion] = field(default_factory=dict)
    admitted: float = 0.0
    batch_rows: int = 0
    first_token: float = 0.0  # when the first token of any choice was sampled
    tag: object = None  # who the job is for (module docstring: owners)


@dataclass
class JobResult:
    completions: list[Completion]
    policy_version: int
    queued_s: float  # submitted -> its engine call started
    generate_s: float  # the engine call it ran in
    batch_rows: int  # rows of that call
    first_token_s: float = 0.0  # submitted -> its first sampled token (whole-call batching: the call's end)


class Scheduler:
    """Owns ``backend`` (a bare trajkit ``Engine`` is wrapped, :func:`trajkit.backends.registry.as_backend`);
    :meth:`submit` from any thread, results through ``concurrent.futures.Future``."""

    def __init__(self, backend, max_batch: int = 64, batch_wait_s: float = 0.005, lock=None, continuous: bool = True):
        self.backend, self.max_batch, self.batch_wait_s = as_backend(backend), max_batch, batch_wait_s
        # held for every engine call and every weight update; an RL trainer passes the lock its own weight
        # sync holds, so a sync waits for the running call (trajkit.envs.agent)
        self.lock = lock if lock is not None else threading.Lock()
        self._queue: queue.Queue[Job | None] = queue.Queue()
        # continuous batching needs the backend's step-wise session (plain or speculative); a backend
        # without one (vLLM's) gets whole generate calls
        self.continuous = continuous and self.backend.capabilities.sessions
        self.steps = 0  # decode steps of the continuous batch
        self._updates_waiting = 0  # weight updates waiting for the lock: admit nothing meanwhile
        self._session = None
        self._held: list[Job] = []  # taken from the queue, not yet admitted
        self._by_row: dict[int, tuple[Job, int]] = {}  # session row id -> (job, choice index)
        self._idle = threading.Condition()
        self._pending = 0
        self._pending_by_tag: dict[object, int] = {}  # jobs queued or running, per tag
        self.calls = 0
        self.error: str | None = None  # the traceback of the error that stopped the thread (None: running)
        self._thread = threading.Thread(target=self._guarded_loop, name="trajkit-gateway-scheduler", daemon=True)
        self._thread.start()

    def submit(self, prompt_ids: list[int], params: list[SamplingParams], on_tokens: OnTokens | None = None,
               tag: object = None) -> Future:
        """Queue one job; its future gets a :class:`JobResult`. ``on_tokens(choice, ids)`` (optional) is called
        on the scheduler thread with each choice's new tokens as they are sampled; ``tag``: who it is for."""
        job = Job(list(prompt_ids), list(params), on_tokens, tag=tag)
        with self._idle:
            if self.error is not None:
                job.future.set_exception(self._died())
                return job.future
            self._pending += 1
            self._pending_by_tag[tag] = self._pending_by_tag.get(tag, 0) + 1
            self._queue.put(job)  # under the lock: a job is either queued before a death is noted, or refused
        return job.future

    def alive(self) -> bool:
        """The thread runs (False once it died, or after :meth:`close`)."""
        return self._thread.is_alive() and self.error is None

    def _died(self) -> SchedulerDied:
        return SchedulerDied(f"the gateway's scheduler thread died:\n{self.error}")

    def _guarded_loop(self) -> None:
        try:
            self._loop()
        except BaseException:  # noqa: BLE001 - recorded and handed to every waiting job (module docstring)
            with self._idle:
                self.error = traceback.format_exc()
            self._fail_waiting()

    def _fail_waiting(self) -> None:
        """Fail every job the dead thread left: running rows, held and queued jobs."""
        jobs = {id(job): job for job, _ in self._by_row.values()}
        jobs.update({id(job): job for job in self._held})
        self._by_row.clear()
        self._held.clear()
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                jobs[id(job)] = job
        for job in jobs.values():
            if not job.future.done():
                job.future.set_exception(self._died())
        self._settled(list(jobs.values()))

    def update_weights(self, state_dict) -> int:
        """Load new weights between engine calls (the running call drains first); the new version."""
        with self._idle:
            self._updates_waiting += 1
        try:
            with self.lock:
                return self.backend.update_weights(state_dict)
        finally:
            with self._idle:
                self._updates_waiting -= 1
                self._idle.notify_all()

    def drain(self, timeout: float | None = None, tag: object = _EVERY) -> bool:
        """Wait until no job is queued or running (with ``tag``: none of that tag's); False on timeout."""
        with self._idle:
            if tag is _EVERY:
                return self._idle.wait_for(lambda: self._pending == 0, timeout)
            return self._idle.wait_for(lambda: not self._pending_by_tag.get(tag), timeout)

    def _settled(self, jobs: list[Job]) -> None:
        """``jobs`` are finished (done, failed or refused): no longer pending."""
        with self._idle:
            self._pending -= len(jobs)
            for job in jobs:
                left = self._pending_by_tag[job.tag] - 1
                if left:
                    self._pending_by_tag[job.tag] = left
                else:
                    del self._pending_by_tag[job.tag]
            self._idle.notify_all()

    def _serving(self, jobs: list[Job]) -> None:
        """Tell a backend that wants to know whose rows it computes (module docstring: owners)."""
        if self.backend.capabilities.serves:
            self.backend.serves([j.tag for j in jobs])

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
        if self.continuous:
            return self._continuous()
        while True:
            first = self._queue.get()
            if first is None:
                return
            jobs = self._collect(first)
            self._held = jobs  # what a death in the call leaves (_fail_waiting)
            self._run(jobs)
            self._held = []
            self._settled(jobs)

    def _run(self, jobs: list[Job]) -> None:
        prompts = [j.prompt_ids for j in jobs for _ in j.params]
        params = [p for j in jobs for p in j.params]
        with self.lock:
            start = time.perf_counter()
            version = self.backend.policy_version
            self._serving(jobs)
            try:
                out = self.backend.generate(prompts, params)
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
            j.future.set_result(JobResult(rows, version, start - j.submitted, seconds, len(prompts),
                                          start + seconds - j.submitted))

    # --- continuous batching (plain or speculative rounds) ---------------------------------------------------------------
    def _continuous(self) -> None:
        closed = False
        while self._held or not closed:
            if not self._held:  # idle: wait for work, then batch_wait_s for others to share its prefill
                first = self._queue.get()
                if first is None:
                    return
                self._held.append(first)
                closed = self._gather(first.submitted + self.batch_wait_s)
            with self._idle:  # a waiting weight update goes first (threading.Lock is not fair)
                self._idle.wait_for(lambda: not self._updates_waiting)
            with self.lock:  # held while any row is in flight (module docstring)
                self._session = self.backend.session()
                closed = self._busy(closed)

    def _busy(self, closed: bool) -> bool:
        """Admit held jobs and step until the batch is empty; whether ``close()`` has come."""
        while True:
            if not closed:
                closed = self._gather()
            if self._held and self._ready():
                self._admit(self._take_held())
            if not self._by_row:
                return closed
            try:
                updates = self._session.step()
            except Exception as exc:  # noqa: BLE001 - fails the batch's jobs, never kills the loop
                self._fail_all(exc)
                return closed
            self.steps += 1
            for u in updates:
                self._deliver(u)

    def _gather(self, until: float | None = None) -> bool:
        """Move queued jobs to ``_held`` (waiting until ``until`` for more while rows fit); True on close()."""
        while sum(len(j.params) for j in self._held) < self.max_batch:
            try:
                wait = None if until is None else until - time.perf_counter()
                job = self._queue.get_nowait() if wait is None or wait <= 0 else self._queue.get(timeout=wait)
            except queue.Empty:
                return False
            if job is None:
                return True
            self._held.append(job)
        return False

    def _ready(self) -> bool:
        """Admit now? Never while a weight update waits; at once into an empty batch or when the batch would
        fill; else once the oldest held job has waited ``batch_wait_s`` (fewer, larger prefills)."""
        with self._idle:
            if self._updates_waiting:
                return False
        rows = len(self._by_row) + sum(len(j.params) for j in self._held)
        return not self._by_row or rows >= self.max_batch or \
            time.perf_counter() - self._held[0].submitted >= self.batch_wait_s

    def _take_held(self) -> list[Job]:
        """Held jobs, oldest first, while they fit in ``max_batch`` (at least one into an empty batch)."""
        jobs, rows = [], len(self._by_row)
        while self._held and (rows + len(self._held[0].params) <= self.max_batch or not (jobs or self._by_row)):
            jobs.append(self._held.pop(0))
            rows += len(jobs[-1].params)
        return jobs

    def _admit(self, jobs: list[Job]) -> None:
        """Prefill ``jobs`` into the running batch together; when the engine refuses the group (a bad
        request), each job alone, so that only the bad one fails."""
        if not jobs:
            return
        try:
            rows = self._session.admit([j.prompt_ids for j in jobs for _ in j.params],
                                       [p for j in jobs for p in j.params])
        except Exception as exc:  # noqa: BLE001 - handed to the waiting request(s)
            if len(jobs) == 1:
                self._finish(jobs[0], exc)
            else:
                for job in jobs:
                    self._admit([job])
            return
        self._serving(jobs)
        self.calls += 1  # in continuous mode a "call" is one admission (one prefill of the jobs that joined)
        now, at = time.perf_counter(), 0
        for job in jobs:
            job.rows, job.admitted = rows[at:at + len(job.params)], now
            at += len(job.params)
            job.batch_rows = len(self._session.rows)
            for k, r in enumerate(job.rows):
                self._by_row[r] = (job, k)

    def _deliver(self, update) -> None:
        job, k = self._by_row[update.row]
        if not job.first_token:
            job.first_token = time.perf_counter()
        if job.on_tokens is not None:
            try:
                job.on_tokens(k, update.token_ids)
            except Exception:  # noqa: BLE001 - a broken listener must not stop the batch
                job.on_tokens = None
        if update.done is None:
            return
        del self._by_row[update.row]
        job.done[k] = update.done
        if len(job.done) == len(job.params):
            now = time.perf_counter()
            result = JobResult([job.done[i] for i in range(len(job.params))], self.backend.policy_version,
                               job.admitted - job.submitted, now - job.admitted, job.batch_rows,
                               job.first_token - job.submitted)
            self._finish(job, result=result)

    def _fail_all(self, exc: Exception) -> None:
        jobs = {id(job): job for job, _ in self._by_row.values()}
        self._by_row.clear()
        for job in jobs.values():
            self._finish(job, exc)

    def _finish(self, job: Job, exc: Exception | None = None, result: JobResult | None = None) -> None:
        if exc is not None:
            job.future.set_exception(exc)
        else:
            job.future.set_result(result)
        self._settled([job])
