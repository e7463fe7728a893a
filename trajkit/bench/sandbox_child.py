"""One side of ``trajkit bench sandbox``, run as a script in its own process so that the trajkit it times is
the one on ``PYTHONPATH`` (this tree, or a baseline checkout given with ``--baseline``).

Prints one JSON object: per round, the milliseconds of a namespace sandbox's ``start`` (with a workdir and
two files copied in), one ``exec("true")``, ``stop``, and a whole trial (the shipped ``hello-file`` task with
the Oracle: sandbox, agent, verifier, reward, stop). Uses only API that every version of trajkit.envs has.
"""
import json
import sys
import tempfile
import time
from pathlib import Path


def one_round(task, spec_for) -> dict:
    try:
        from trajkit.envs.sandbox.namespace import NamespaceSandbox
    except ImportError:  # a baseline from before the sandbox had its own package
        from trajkit.envs.harbor.nsbox import NamespaceSandbox
    from trajkit.envs.harbor.trial import AGENTS, run_trial

    box = NamespaceSandbox(spec_for(task))
    t0 = time.perf_counter()
    box.start()
    t1 = time.perf_counter()
    box.exec("true", timeout_s=30)
    t2 = time.perf_counter()
    box.stop()
    t3 = time.perf_counter()
    result = run_trial(task, AGENTS["oracle"], "oracle")
    t4 = time.perf_counter()
    if result.reward != 1.0:
        raise SystemExit(f"the Oracle trial failed: {result.error}")
    return {"start_ms": (t1 - t0) * 1e3, "exec_ms": (t2 - t1) * 1e3, "stop_ms": (t3 - t2) * 1e3,
            "trial_ms": (t4 - t3) * 1e3}


def main() -> None:
    tasks, rounds = Path(sys.argv[1]), int(sys.argv[2])
    from trajkit.envs.harbor.task import load_task
    from trajkit.envs.harbor.trial import sandbox_spec

    task = load_task(tasks / "hello-file")
    out = [one_round(task, sandbox_spec) for _ in range(rounds)]
    import trajkit.envs

    print(json.dumps({"trajkit": str(Path(trajkit.envs.__file__).parents[1]), "rounds": out}))


if __name__ == "__main__":
    tempfile.tempdir = None
    main()
