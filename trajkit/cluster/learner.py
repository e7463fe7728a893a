"""The policy worker behind the :class:`~trajkit.rl.learner.Learner` seam, for the controller's step.

``push_weights`` asks the policy worker for its state dicts and hands the resulting object-store ref to
the rollout workers (the tensors never pass through the controller); ``logprobs`` sends the collated
batch and gets the mismatch gap back; ``update`` runs the update there. Every wait is bounded
(``cluster.timeout_s``) and a failure there is a :class:`~trajkit.cluster.errors.ClusterError` with the
policy worker's message.
"""
from __future__ import annotations

from trajkit.cluster.errors import gather


class RemoteLearner:
    def __init__(self, actor, timeout_s: float, transfer: str = "object_store"):
        self.actor, self.timeout_s, self.transfer = actor, timeout_s, transfer

    def _call(self, ref, what: str):
        return gather([ref], [f"policy worker {what}"], self.timeout_s)[0]

    def push_weights(self, rollout) -> None:
        with rollout.lock:
            if self.transfer == "nccl":  # GPU to GPU (trajkit.cluster.nccl); the workers count the new version
                self._call(self.actor.send_nccl.remote(), "NCCL weight send")
                rollout.backend.arrived()
            else:
                rollout.backend.load(self.actor.weights.remote())

    def logprobs(self, batch, step: int) -> dict:
        return self._call(self.actor.logprobs.remote(batch, step), "logprobs")

    def update(self, step: int) -> dict:
        return self._call(self.actor.update.remote(step), "update")

    def save(self, path: str, counters: dict) -> str:
        return self._call(self.actor.save.remote(path, counters), "save")

    def load(self, path: str) -> dict:
        return self._call(self.actor.load.remote(path), "load")
