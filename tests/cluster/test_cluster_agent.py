"""Agent tasks on Ray: ``task.name=agent`` with ``cluster.ray=true cluster.rollout_workers=2`` samples what the
in-process trainer samples. The harness runs and the gateway live in the controller; the gateway serves the
rollout workers as one backend (whole generate calls split over them, each row with its own seed), so every
token, reward and policy version equals the in-process step's, which batches the same requests continuously
on one engine (log-probs: other batch shapes, float rounding only)."""
import pytest

from tests.cluster.test_cluster_step import config
from tests.envs.test_agent import ROWS, odd_length, two_turns
from tests.rl.conftest import one_thread  # noqa: F401 (autouse: tiny models on one thread)
from trajkit.cluster import ClusterTrainer
from trajkit.envs.agent import AgentTask
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.rl.trainer import Trainer

pytestmark = pytest.mark.usefixtures("ray_cluster")


def _steps(trainer, task, steps):
    try:
        return [trainer.step_once() for _ in range(steps)], task.env.gateway
    finally:
        trainer.close()


def test_an_agent_task_on_two_ray_workers_samples_what_it_samples_in_process(tmp_path):
    local_task = AgentTask(ROWS, byte_tokenizer(), two_turns, reward_funcs=[odd_length])
    ref, _ = _steps(Trainer(config(tmp_path, "local"), task=local_task, logger=False), local_task, 2)
    ray_task = AgentTask(ROWS, byte_tokenizer(), two_turns, reward_funcs=[odd_length])
    trainer = ClusterTrainer(config(tmp_path, "ray", "cluster.ray=true", "cluster.rollout_workers=2"),
                             task=ray_task, logger=False)
    workers = trainer.state.rollout.backend
    got, gateway = _steps(trainer, ray_task, 2)
    assert not gateway.scheduler.continuous and gateway.degraded  # whole calls over the workers, said so
    for a, b in zip(ref, got, strict=True):
        assert len(b.samples) == 8 and all(len(s.completion_ids) > 0 for s in b.samples)
        assert [s.prompt_ids for s in a.samples] == [s.prompt_ids for s in b.samples]
        assert [s.completion_ids for s in a.samples] == [s.completion_ids for s in b.samples]
        assert [s.loss_mask for s in a.samples] == [s.loss_mask for s in b.samples]
        assert [s.reward for s in a.samples] == [s.reward for s in b.samples]
        assert [s.policy_version for s in a.samples] == [s.policy_version for s in b.samples]
        assert max(abs(x - y) for s, t in zip(a.samples, b.samples) for x, y in zip(s.logprobs, t.logprobs)) < 1e-5
        assert b.metrics["mismatch/max_abs"] < 1e-4
    assert workers.workers == []  # closed with the trainer
