"""N rollout workers behind the backend protocol: a batch split across them, the results in batch order.

:class:`RayRollouts` is what the controller's :class:`~trajkit.rl.rollout.Rollout` generates through. A
call's rows are cut into ``N`` contiguous slices (:func:`split_rows`; a GRPO group's rows stay together
when the group size divides the slice), every slice goes to its worker at once, and the answers are
gathered with one deadline (``cluster.timeout_s``): a worker that raises fails the call with its message
and traceback (:class:`~trajkit.cluster.errors.ClusterError`), a dead or silent one too, never a hang.

Seeds: a request with one ``SamplingParams`` seeded ``s`` numbers its rows 0..B-1 and row ``i`` draws the
stream ``mix(s, i)`` (:mod:`trajkit.engine.rng`). Each row is sent as its own request (a per-row params list,
where every row is index 0) seeded :func:`~trajkit.engine.rng.row_seed` ``(s, i)``, which draws that same
stream: a row's sample does not depend on how the batch was split, or on the number of workers.

Weights: :meth:`RayRollouts.load` passes one object-store ref (the policy worker's state dicts) to every
worker; Ray moves the tensors once per node, never through the controller.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Sequence

from trajkit.backends.base import Capabilities
from trajkit.cluster.errors import ClusterError, gather
from trajkit.engine.params import SamplingParams, per_row
from trajkit.engine.rng import row_seed
from trajkit.engine.types import Completions, GenerationStats


def split_rows(rows: int, parts: int) -> list[range]:
    """``rows`` row indices in at most ``parts`` contiguous, non-empty slices, sizes differing by <= 1.

    >>> split_rows(8, 2), split_rows(5, 2), split_rows(1, 3)
    ([range(0, 4), range(4, 8)], [range(0, 3), range(3, 5)], [range(0, 1)])
    """
    parts = max(1, min(parts, rows))
    base, extra = divmod(rows, parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (i < extra)
        out.append(range(start, start + size))
        start += size
    return out


def own_requests(params: SamplingParams | Sequence[SamplingParams], rows: int) -> list[SamplingParams]:
    """One ``SamplingParams`` per row such that, sent as a per-row list, row ``i`` draws what it draws in
    the original request (a shared, seeded ``params``: seed ``row_seed(seed, i)``; a per-row list or an
    unseeded request: unchanged)."""
    if not isinstance(params, SamplingParams) or params.seed is None:
        return per_row(params, rows)
    return [replace(params, seed=row_seed(params.seed, i)) for i in range(rows)]


class RayRollouts:
    """``workers`` (:class:`~trajkit.cluster.workers.RolloutWorker` actors) as one backend; ``infos``: each
    worker's :meth:`~trajkit.cluster.workers.RolloutWorker.info`."""

    def __init__(self, workers: list, infos: list[dict], timeout_s: float):
        self.workers, self.timeout_s = workers, timeout_s
        first = infos[0]
        self.name = first["backend"]
        self.guarantees = first["guarantees"]
        self.vocab_size = first["vocab_size"]
        self.num_params = first["num_params"]
        # its own part: the episodes of an environment that serves generation run on the workers (episodes())
        self.capabilities = Capabilities(episodes=True)
        self.engine = None  # the engines are the workers'
        # a gateway serving the workers as one backend reads the window and the stop ids here (a user's own;
        # the agent and Harbor tasks run a gateway on each worker instead: episodes())
        self.context_window = first["context_window"]
        self.generation_config = first["generation_config"]
        self._version = 0
        self._calls, self._tokens, self._seconds = 0, 0, 0.0
        self.task_name, self.task_pids = None, []  # set_task: the agent-style task the workers run

    @property
    def policy_version(self) -> int:
        return self._version

    def generate(self, prompt_ids: list[list[int]],
                 params: SamplingParams | Sequence[SamplingParams] | None = None) -> Completions:
        params = SamplingParams() if params is None else params
        rows = own_requests(params, len(prompt_ids))
        slices = split_rows(len(prompt_ids), len(self.workers))
        started = time.perf_counter()
        refs = [self.workers[i].generate.remote([list(prompt_ids[r]) for r in sl], rows[sl.start:sl.stop])
                for i, sl in enumerate(slices)]
        parts = gather(refs, [f"rollout worker {i} generate" for i in range(len(refs))], self.timeout_s)
        seconds = time.perf_counter() - started
        stats = GenerationStats.merge(*(p.stats for p in parts))
        stats.seconds = seconds  # the workers ran at once: the call's wall time, not the sum of theirs
        versions = {p.policy_version for p in parts}
        if len(versions) != 1:
            raise ClusterError(f"rollout workers answered with different weight versions {sorted(versions)}")
        self._calls += 1
        self._tokens += stats.new_tokens
        self._seconds += seconds
        return Completions([c for p in parts for c in p], stats, versions.pop())

    def set_task(self, task=None) -> None:
        """Every worker holds the run's agent-style task (:meth:`RolloutWorker.set_task`: ``task`` as given,
        pickled by Ray, or None: each builds it from the config); their pids are :attr:`task_pids`."""
        infos = gather([w.set_task.remote(task) for w in self.workers],
                       [f"rollout worker {i} task setup" for i in range(len(self.workers))], self.timeout_s)
        self.task_name = infos[0]["task"]
        self.task_pids = [i["pid"] for i in infos]

    def episodes(self, rows: list, params: SamplingParams, round_no: int,
                 timeout_s: float | None = None) -> tuple[list, list[GenerationStats], list[int]]:
        """Round ``round_no``'s episodes of ``rows``: worker ``i`` runs the ``i``-th contiguous slice
        (:func:`split_rows`) with a gateway over its own backend, each run keeping the session id and seed key,
        and so the seeds, it has in process (:meth:`trajkit.envs.agent.GatewayEnv.rollout_part`) -> (the samples
        in row order, every call's stats, the calls' versions). One deadline, the longer of
        ``cluster.timeout_s`` and the round's own (``timeout_s``, the environment's) plus a minute; a worker
        that raises, dies or is silent fails the round naming the worker and the task."""
        slices = split_rows(len(rows), len(self.workers))
        started = time.perf_counter()
        refs = [self.workers[i].episodes.remote(list(rows[sl.start:sl.stop]), params, round_no, sl.start)
                for i, sl in enumerate(slices)]
        whats = [f"rollout worker {i} episodes of task {self.task_name}" for i in range(len(refs))]
        parts = gather(refs, whats, max(self.timeout_s, (timeout_s or 0.0) + 60.0))
        samples = [s for p in parts for s in p[0]]
        stats = [st for p in parts for st in p[1]]
        self._calls += len(stats)
        self._tokens += sum(st.new_tokens for st in stats)
        self._seconds += time.perf_counter() - started
        return samples, stats, [v for p in parts for v in p[2]]

    def load(self, weights_ref) -> int:
        """Every worker loads the weights behind ``weights_ref`` (an object-store ref of ``{"policy": state
        dict, "draft": state dict or None}``); -> the new version."""
        refs = [w.load.remote(weights_ref) for w in self.workers]
        versions = set(gather(refs, [f"rollout worker {i} weight load" for i in range(len(refs))], self.timeout_s))
        if len(versions) != 1:
            raise ClusterError(f"rollout workers are at different weight versions {sorted(versions)} after a sync")
        self._version = versions.pop()
        return self._version

    def arrived(self) -> int:
        """Weights reached every worker's engine by another path (NCCL); count the new version there."""
        refs = [w.arrived.remote() for w in self.workers]
        versions = set(gather(refs, [f"rollout worker {i} version" for i in range(len(refs))], self.timeout_s))
        self._version = max(versions)
        return self._version

    def update_weights(self, state_dict: dict) -> int:
        """The backend protocol's update: ``state_dict`` (policy weights) put in the object store once."""
        import ray

        return self.load(ray.put({"policy": state_dict, "draft": None}))

    def stats(self) -> dict:
        per_worker = gather([w.stats.remote() for w in self.workers],
                            [f"rollout worker {i} stats" for i in range(len(self.workers))], self.timeout_s)
        return {"backend": f"{self.name} x {len(self.workers)} Ray workers", "calls": self._calls,
                "weight_updates": self._version, "policy_version": self._version, "new_tokens": self._tokens,
                "seconds": self._seconds, "tokens_per_s": self._tokens / self._seconds if self._seconds else 0.0,
                "workers": per_worker}

    def close(self) -> None:
        import ray

        for w in self.workers:
            try:
                ray.get(w.close.remote(), timeout=self.timeout_s)
            except ray.exceptions.RayError:
                pass  # a dead worker has nothing left to release
            ray.kill(w)
        self.workers = []
