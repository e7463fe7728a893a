"""``trajkit bench rollout --task harbor``: agent-task episodes/s of each generation backend, side by side.

Each arm (the backends of :mod:`trajkit.bench.rollout`: ``trajkit``, ``vllm``, ``trajkit-ray2``,
``vllm-ray2``) serves the same ``--episodes`` Harbor episodes: prompt ``i`` of the tasks under ``--task-path``
(the shipped ``trajkit/envs/tasks`` by default; task ``i`` drawn from seed 0, so every arm runs the same tasks),
each one trial with trajkit's shell agent (``--max-turns`` replies of at most ``--tokens`` tokens, temperature
0.7, seeded) in a fresh namespace sandbox, its model the gateway over the arm's backend
(:class:`trajkit.envs.agent.GatewayEnv`, the path ``task.name=harbor`` trains on); on a Ray arm each worker
runs its half of the trials with a gateway over its own engine, as a ``cluster.ray=true`` run does
(:meth:`trajkit.cluster.split.RayRollouts.episodes`). Timed: the whole round, from the first trial's start
to the last sample (sandboxes, the agent, the verifier and generation); episodes/s is episodes over that.
Reported beside it: the samples' calls and sampled tokens, failed trials, the mean reward of the rest, what
the gateway degraded for the backend, and the load average. The ``vs trajkit`` column is the arm's
episodes/s over trajkit's.
"""
from __future__ import annotations

import os
import time


def add_arguments(p) -> None:
    p.add_argument("--task", choices=("none", "harbor"), default="none",
                   help="harbor: time Harbor episodes (trials through the gateway) per arm instead of raw tokens/s")
    p.add_argument("--task-path", default=None, help="Harbor task folder(s) for --task harbor (default: the shipped "
                                                     "trajkit/envs/tasks)")
    p.add_argument("--episodes", type=int, default=4, help="episodes per arm for --task harbor (default 4)")
    p.add_argument("--max-turns", type=int, default=2, help="shell agent replies per episode (default 2)")


def measure_episodes(arm: str, folder: str, args, make_backend) -> dict:
    from trajkit.engine import SamplingParams
    from trajkit.envs.client import GenerationClient
    from trajkit.envs.harbor.rltask import HarborRLTask, trial_reward
    from trajkit.models.load import load_tokenizer

    started = time.perf_counter()
    backend = make_backend(arm, folder, args.threads)
    start_s = time.perf_counter() - started
    ray_arm = backend.capabilities.episodes  # a Ray arm: its workers as one backend, each running its trials
    served = backend.rollouts if ray_arm else backend
    tokenizer = load_tokenizer(folder, what="smollm2")
    task = HarborRLTask(args.task_path or _shipped(), tokenizer, seed=0, max_turns=args.max_turns)
    prompts = [task.prompt(i) for i in range(args.episodes)]
    params = SamplingParams(temperature=0.7, max_new_tokens=args.tokens, seed=0)
    try:
        t0 = time.perf_counter()
        if ray_arm:  # each worker runs its trials, a gateway over its engine
            served.set_task(task)
            samples, _, _ = served.episodes(prompts, params, task.env.next_round(), task.env.timeout_s)
            seconds = time.perf_counter() - t0
            degraded = _worker_notes(served)
        else:
            samples = task.env.rollout(GenerationClient(served), prompts, params)
            seconds = time.perf_counter() - t0
            degraded = [note.split(":")[0] for note in task.env.gateway.degraded]
    finally:
        task.env.close()
        backend.close()
    rewards = trial_reward(None, [s.metadata["columns"]["harness_output"] for s in samples])
    scored = [r for r in rewards if r is not None]
    return {"arm": arm, "start_s": start_s, "episodes": len(samples), "seconds": seconds,
            "episodes_per_s": len(samples) / seconds, "calls": sum(s.metadata["calls"] for s in samples),
            "tokens": sum(sum(s.loss_mask) for s in samples), "failed": len(rewards) - len(scored),
            "reward_mean": sum(scored) / len(scored) if scored else None, "degraded": degraded,
            "load_after": os.getloadavg()[0]}


def _worker_notes(rollouts) -> list[str]:
    from trajkit.cluster.errors import gather

    notes = gather([w.degraded.remote() for w in rollouts.workers],
                   [f"rollout worker {i} gateway notes" for i in range(len(rollouts.workers))], rollouts.timeout_s)
    return sorted({note.split(":")[0] for per in notes for note in per})


def _shipped() -> str:
    import trajkit.envs

    return os.path.join(os.path.dirname(trajkit.envs.__file__), "tasks")


def table(results: dict) -> None:
    base = next((a["episodes_per_s"] for a in results["arms"] if a["arm"] == "trajkit"), None)
    print(f"Harbor episodes through the gateway: {results['episodes']} per arm, shell agent <= {results['max_turns']} "
          f"replies x {results['tokens']} tokens, SmolLM2-135M-Instruct float32 CPU")
    print(f"load average {results['load_start']:.2f} at the start, {results['load_end']:.2f} at the end")
    print(f"{'arm':<14}{'start s':>9}{'episodes':>9}{'seconds':>9}{'eps/s':>8}{'vs trajkit':>11}{'calls':>7}"
          f"{'tokens':>8}{'failed':>7}{'reward':>8}{'load':>6}  degraded")
    for a in results["arms"]:
        ratio = f"{a['episodes_per_s'] / base:.2f}x" if base else "-"
        reward = "-" if a["reward_mean"] is None else f"{a['reward_mean']:.2f}"
        print(f"{a['arm']:<14}{a['start_s']:>9.1f}{a['episodes']:>9}{a['seconds']:>9.1f}{a['episodes_per_s']:>8.3f}"
              f"{ratio:>11}{a['calls']:>7}{a['tokens']:>8}{a['failed']:>7}{reward:>8}{a['load_after']:>6.1f}  "
              f"{', '.join(a['degraded']) or '-'}")
