"""Tinker futures: every training and sampling call returns ``{request_id}`` at once and runs later.

One worker thread runs the submitted jobs in submission order (the model is one set of tensors; the
SDK orders each training client's requests by ``seq_id`` before sending them, so arrival order is its
order). ``/api/v1/retrieve_future`` waits (on the event loop, no thread held) up to :data:`LONG_POLL_S` for the
job, then answers
``{"type": "try_again"}`` (the SDK polls again); a finished job answers its result: a dict (JSON), or
protobuf bytes for ``ForwardBackwardOutput``/``SampleResponse``. A job that raised answers Tinker's
failure form ``{"error": message, "category": "user"|"server"}``, which the SDK raises as
``RequestFailedError``: a typed trajkit error (bad input) is the user's, anything else the server's, its
traceback logged here and never sent.
"""
from __future__ import annotations

import itertools
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from trajkit.errors import TrajkitError

LONG_POLL_S = 30.0  # under the SDK's 45 s timeout of a retrieve_future call
log = logging.getLogger("trajkit.tinker")


@dataclass
class Job:
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: dict | None = None
    waiters: list = field(default_factory=list)  # (event loop, asyncio.Future) of long polls

    def finish(self, lock: threading.Lock) -> None:
        with lock:
            self.done.set()
            waiters, self.waiters = self.waiters, []
        for loop, fut in waiters:
            loop.call_soon_threadsafe(_settle, fut)


def _settle(fut) -> None:
    if not fut.done():
        fut.set_result(None)


def failure(exc: BaseException) -> dict:
    """Tinker's failure body for ``exc`` (user for trajkit's typed errors, else server, traceback logged)."""
    if isinstance(exc, TrajkitError):
        return {"error": str(exc), "category": "user"}
    log.exception("tinker job failed", exc_info=exc)
    return {"error": f"internal error ({type(exc).__name__}: {exc})", "category": "server"}


class Futures:
    def __init__(self):
        self._jobs: dict[str, Job] = {}
        self._ids = itertools.count(1)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tinker-worker")
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], Any]) -> str:
        """Queue ``fn``; -> its request id."""
        with self._lock:
            request_id = f"req-{next(self._ids)}"
            job = self._jobs[request_id] = Job()
        self._pool.submit(self._run, job, fn)
        return request_id

    def _run(self, job: Job, fn) -> None:
        try:
            job.result = fn()
        except BaseException as exc:  # every failure becomes the future's answer, never a lost thread
            job.error = failure(exc)
        job.finish(self._lock)

    def run(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the worker now and wait for it (a direct call that touches the models)."""
        return self._pool.submit(fn).result()

    async def get(self, request_id: str, timeout: float = LONG_POLL_S) -> Job | None:
        """The job, awaited for up to ``timeout`` s without holding a thread (check ``done``); None for an
        unknown id."""
        import asyncio

        job = self._jobs.get(request_id)
        if job is None:
            return None
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._lock:
            if job.done.is_set():
                return job
            job.waiters.append((loop, fut))
        try:
            await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            pass
        return job

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
