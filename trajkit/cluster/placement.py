"""Where the actors of a Ray run go: one placement group, bundles 0..P-1 the policy worker(s) (P > 1: a
sharded gang, :mod:`trajkit.cluster.gang`), the next N the rollout workers.

``colocated`` (``STRICT_PACK``): every bundle on one node, the layout of one GPU node or of this CPU box,
where the policy and the rollout engines share the machine (fractional ``worker_cpus``/``worker_gpus``
let several actors share one CPU or GPU, as NeMo RL's colocated mode shares GPUs between vLLM and the
policy). ``split`` (``SPREAD``): bundles spread over the nodes, best effort (NeMo RL's and verl's
non-colocated generation: rollout workers on their own nodes). Ray reserves the whole group before any
actor starts, so a layout the cluster cannot hold fails at once with what was asked and what Ray has,
instead of leaving half the actors waiting.
"""
from __future__ import annotations

from dataclasses import dataclass

from trajkit.backends.actors import require_ray
from trajkit.errors import ConfigError

STRATEGIES = {"colocated": "STRICT_PACK", "split": "SPREAD"}


def bundles(rollout_workers: int, cpus: float, gpus: float, policy_workers: int = 1) -> list[dict]:
    """One resource bundle per actor: the policy workers' (one, or a sharded gang's), then each rollout
    worker's.

    >>> bundles(2, 0.5, 0.0)
    [{'CPU': 0.5}, {'CPU': 0.5}, {'CPU': 0.5}]
    """
    one = {"CPU": cpus, **({"GPU": gpus} if gpus else {})}
    return [dict(one) for _ in range(rollout_workers + policy_workers)]


@dataclass
class Placement:
    """A reserved placement group; :meth:`options` gives the Ray actor options of bundle ``index``."""

    group: object
    bundles: list[dict]
    layout: str

    def options(self, index: int) -> dict:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        b = self.bundles[index]
        return {"num_cpus": b["CPU"], "num_gpus": b.get("GPU", 0),
                "scheduling_strategy": PlacementGroupSchedulingStrategy(
                    placement_group=self.group, placement_group_bundle_index=index)}

    def remove(self) -> None:
        from ray.util.placement_group import remove_placement_group

        if self.group is not None:
            remove_placement_group(self.group)
            self.group = None


def place(layout: str, rollout_workers: int, cpus: float, gpus: float, timeout_s: float,
          policy_workers: int = 1) -> Placement:
    """Reserve the bundles of a run (:func:`bundles`) with ``layout``'s strategy; a clear error when Ray
    cannot hold them within ``timeout_s``."""
    ray = require_ray()
    from ray.util.placement_group import placement_group, remove_placement_group

    if layout not in STRATEGIES:
        raise ConfigError(f"cluster.layout must be one of {sorted(STRATEGIES)}, got {layout!r}")
    wanted = bundles(rollout_workers, cpus, gpus, policy_workers)
    group = placement_group(wanted, strategy=STRATEGIES[layout], name="")
    ready, _ = ray.wait([group.ready()], timeout=timeout_s)
    if not ready:
        remove_placement_group(group)
        raise ConfigError(f"cluster.layout={layout}: Ray cannot place {len(wanted)} actors of {wanted[0]} each "
                          f"({policy_workers} policy worker(s) + {rollout_workers} rollout workers) in {timeout_s:g} s; it has "
                          f"{ray.available_resources()} free. Lower cluster.worker_cpus/worker_gpus or "
                          "cluster.rollout_workers, or add nodes")
    return Placement(group, wanted, layout)
