"""One benchmark side run as a child process: its output, wall seconds and CPU seconds (the child's own and
those of every process it waited for, e.g. a worker pool), read from ``RUSAGE_CHILDREN`` around the run."""
from __future__ import annotations

import resource
import subprocess
import time


def run_timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[str, float, float]:
    """``(stdout, wall_s, cpu_s)`` of running ``argv``; RuntimeError with its stderr when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"benchmark child failed ({' '.join(argv)}):\n{done.stderr[-2000:]}")
    return done.stdout, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
