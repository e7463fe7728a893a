"""A command's output, read from its pipes: the last ``MAX_OUTPUT`` bytes of each stream, no file anywhere.

The sandbox's stdout and stderr are pipes to the host; a selector reads both as they fill and keeps a bounded
tail (at most ``2 * MAX_OUTPUT`` bytes each before trimming), so what a command prints costs the host a few
MiB of memory whatever its size and no disk (a file would sit outside ``storage_mb``). The reads end when every
writer is gone: the command's namespace ends with its pid 1, and at the time limit the caller's ``kill`` and
``kill_rest`` end it.
"""
from __future__ import annotations

import os
import selectors
import subprocess
import time
from typing import Callable

from trajkit.envs.sandbox.base import MAX_OUTPUT


def collect(proc: subprocess.Popen, timeout_s: float, kill: Callable[[subprocess.Popen], None],
            kill_rest: Callable[[], None]) -> tuple[tuple[bytes, bytes], bool]:
    """Read ``proc``'s stdout and stderr pipes to their end, keeping the last ``MAX_OUTPUT`` bytes of each
    (the output never touches a disk: 500 MB printed costs ~2 MiB of memory), and wait for it; at
    ``timeout_s`` ``kill`` it (and, by ``kill_rest``, any process of the sandbox still holding a pipe).
    -> ((stdout tail, stderr tail), timed out)."""
    tails = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    deadline, timed_out = time.monotonic() + timeout_s, False
    with selectors.DefaultSelector() as sel:
        for fd in tails:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0 and not timed_out:
                kill(proc)
                kill_rest()
                timed_out, deadline = True, time.monotonic() + 10.0  # every writer is dead: EOF follows
                continue
            events = sel.select(timeout=min(left, 3600.0))  # epoll takes at most ~24 days
            if timed_out and not events and time.monotonic() >= deadline:
                break
            for key, _ in events:
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                tail = tails[key.fd]
                tail += chunk
                if len(tail) > 2 * MAX_OUTPUT:
                    del tail[:-MAX_OUTPUT]
    proc.stdout.close()
    proc.stderr.close()
    if not timed_out:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill(proc)
            timed_out = True
    else:
        proc.wait()
    out, err = tails.values()
    return (bytes(out[-MAX_OUTPUT:]), bytes(err[-MAX_OUTPUT:])), timed_out
