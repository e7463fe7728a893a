"""The error of a Ray run, and the one wait every actor call goes through.

A failure inside an actor (a ``RayTaskError``: the actor's exception with its traceback), an actor that
died (``RayActorError``) and an actor that did not answer by the deadline all become one
:class:`ClusterError` naming the actor and the call, carrying the actor's own message.
"""
from __future__ import annotations

import time

from trajkit.backends.actors import call, require_ray
from trajkit.errors import TrajkitError


class ClusterError(TrajkitError, RuntimeError):
    """A Ray actor of the run failed, died or did not answer; the message is the actor's own."""


def gather(refs: list, whats: list[str], timeout_s: float) -> list:
    """Every ref's value, in order, waiting at most ``timeout_s`` for all of them together; the first
    failure to arrive (not the first in order) is raised at once, as :class:`ClusterError`."""
    ray = require_ray()
    names = dict(zip(refs, whats))
    deadline = time.monotonic() + timeout_s
    pending, values = list(refs), {}
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
        if not ready:
            late = ", ".join(names[r] for r in pending)
            raise ClusterError(f"{late}: no answer from its Ray actor in {timeout_s:g} s (cluster.timeout_s)")
        for ref in ready:
            values[ref] = call(ref, names[ref], timeout_s, error=ClusterError)
    return [values[r] for r in refs]
