"""Agent tasks on Ray: ``task.name=agent`` with ``cluster.ray=true cluster.rollout_workers=2`` samples what the
in-process trainer samples, and its episodes run on the rollout workers. Each worker holds the task and runs
its slice of the round's rows (rows 0-3 on worker 0, 4-7 on worker 1) with a gateway over its own engine; a
run keeps its in-process session id and so its seeds, so every token, reward and policy version equals the
in-process step's (log-probs: another batch shape on each engine, float rounding only). The harness writes
its process id per run: the reference for where the episode ran. A worker killed mid-round fails the step
naming the worker and the task, within the round's deadline."""
import json
import os
import signal
from pathlib import Path

import pytest

from tests.cluster.test_cluster_step import config
from tests.envs.test_agent import ROWS, odd_length, two_turns
from tests.rl.conftest import one_thread  # noqa: F401 (autouse: tiny models on one thread)
from trajkit.cluster import ClusterError, ClusterTrainer
from trajkit.envs.agent import AgentTask, HarnessRun
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.rl.trainer import Trainer

pytestmark = pytest.mark.usefixtures("ray_cluster")


class WhereHarness:
    """:func:`two_turns`, writing the process id it ran in to ``folder/SESSION``; once ``folder/kill`` exists,
    the run of row 7 kills its process (on Ray: rollout worker 1) instead."""

    def __init__(self, folder: Path):
        self.folder = folder

    def __call__(self, run: HarnessRun) -> str:
        (self.folder / run.session).write_text(str(os.getpid()))
        if (self.folder / "kill").exists() and run.session.endswith("-7"):
            os.kill(os.getpid(), signal.SIGKILL)
        return two_turns(run)


def _task(folder: Path) -> AgentTask:
    folder.mkdir()
    return AgentTask(ROWS, byte_tokenizer(), WhereHarness(folder), reward_funcs=[odd_length])


def test_agent_episodes_run_on_two_ray_workers_and_sample_what_they_sample_in_process(tmp_path):
    local = Trainer(config(tmp_path, "local"), task=_task(tmp_path / "local_runs"), logger=False)
    try:
        ref = [local.step_once() for _ in range(2)]
    finally:
        local.close()
    runs = tmp_path / "ray_runs"
    trainer = ClusterTrainer(config(tmp_path, "ray", "cluster.ray=true", "cluster.rollout_workers=2"),
                             task=_task(runs), logger=False)
    try:
        workers = trainer.state.rollout.backend
        got = [trainer.step_once() for _ in range(2)]
        assert trainer.state.task.env.gateway is None  # the controller started no gateway: no episode ran here
        pids = workers.task_pids
        assert len(set(pids)) == 2 and os.getpid() not in pids
        for a, b in zip(ref, got, strict=True):
            assert len(b.samples) == 8 and all(len(s.completion_ids) > 0 for s in b.samples)
            for row, s in enumerate(b.samples):  # where each episode ran, as its harness saw it
                assert s.metadata["rollout_worker"] == row // 4
                assert int((runs / s.metadata["session"]).read_text()) == pids[row // 4]
            assert [s.metadata["session"] for s in a.samples] == [s.metadata["session"] for s in b.samples]
            assert [s.prompt_ids for s in a.samples] == [s.prompt_ids for s in b.samples]
            assert [s.completion_ids for s in a.samples] == [s.completion_ids for s in b.samples]
            assert [s.loss_mask for s in a.samples] == [s.loss_mask for s in b.samples]
            assert [s.reward for s in a.samples] == [s.reward for s in b.samples]
            assert [s.policy_version for s in a.samples] == [s.policy_version for s in b.samples]
            assert [s.token_versions for s in a.samples] == [s.token_versions for s in b.samples]
            assert max(abs(x - y) for s, t in zip(a.samples, b.samples) for x, y in zip(s.logprobs, t.logprobs)) < 1e-5
            assert b.metrics["gen/tokens"] == a.metrics["gen/tokens"]  # the workers' calls counted here
            assert b.metrics["mismatch/max_abs"] < 1e-4
        (runs / "kill").touch()  # the next round's row 7 kills rollout worker 1 mid-episode
        with pytest.raises(ClusterError, match=r"rollout worker 1 episodes of task agent: its Ray actor died"):
            trainer.step_once()
    finally:
        trainer.close()
    assert workers.workers == []  # closed with the trainer, the dead worker too


def test_harbor_trials_built_from_the_config_run_on_the_workers_as_in_process(tmp_path, request):
    """``task.name=harbor`` given by its keys only: each worker builds the task with the registry and runs one
    trial (a group of 2, one row each) in its own sandbox; the trials, tokens and rewards equal the in-process
    step's, and the controller never started a gateway (no trial could have run there)."""
    from tests.conftest import skip_or_fail
    from tests.envs.harbor.conftest import SHIPPED
    from tests.envs.harbor.test_rl import harbor
    from trajkit.envs.sandbox import namespace as nsbox

    why = nsbox.available()
    if why:
        skip_or_fail(request, f"the namespace sandbox cannot run here: {why}")
    local = Trainer(harbor(tmp_path / "local", SHIPPED / "hello-file"), logger=False)
    try:
        ref = local.step_once()
    finally:
        local.close()
    trainer = ClusterTrainer(harbor(tmp_path / "ray", SHIPPED / "hello-file", "cluster.ray=true",
                                    "cluster.rollout_workers=2"), logger=False)
    try:
        got = trainer.step_once()
        assert trainer.state.task.env.gateway is None
    finally:
        trainer.close()
    assert [s.metadata["rollout_worker"] for s in got.samples] == [0, 1]
    for a, b in zip(ref.samples, got.samples, strict=True):
        trial_a, trial_b = (json.loads(s.metadata["columns"]["harness_output"]) for s in (a, b))
        assert trial_a["task"] == trial_b["task"] == "hello-file" and trial_a["error"] is trial_b["error"] is None
        assert b.completion_ids == a.completion_ids and b.loss_mask == a.loss_mask and len(b.completion_ids) > 0
        assert b.raw_reward == a.raw_reward == trial_b["reward"]
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-5
    assert got.metrics["reward/unscorable"] == ref.metrics["reward/unscorable"] == 0.0


def test_async_agent_batches_on_ray_are_the_rounds_of_their_steps_as_in_process(tmp_path):
    """``rollout.mode=async`` with K=1, each update held until the next batch is made (so batch ``s + 1`` is
    sampled by the weights after update ``s - 1`` on both): on the Ray workers as in process, batch ``s``'s
    sessions are round ``s + 1``'s (reserved in step order, whatever the threads' timing), with the same
    tokens and versions, and the bound held. Each worker runs one round's slice at a time (a Ray actor call
    at a time), so on Ray the batches queue on the workers instead of overlapping there."""
    from tests.rl.test_async import hold_updates_until_the_next_batch_is_made

    def steps(make, name, *extra):
        cfg = config(tmp_path, name, "rollout.mode=async", "rollout.max_staleness=1", *extra)
        trainer = make(cfg, task=_task(tmp_path / f"{name}_runs"), logger=False)
        hold_updates_until_the_next_batch_is_made(trainer, 3)
        try:
            return [trainer.step_once() for _ in range(3)]
        finally:
            trainer.close()
    local = steps(Trainer, "local")
    ray = steps(ClusterTrainer, "ray", "cluster.ray=true", "cluster.rollout_workers=2")
    for s, (a, b) in enumerate(zip(local, ray, strict=True)):
        assert [x.metadata["session"] for x in a.samples] == [x.metadata["session"] for x in b.samples] == \
            [f"run-{s + 1}-{i}" for i in range(8)]
        assert [x.metadata["rollout_worker"] for x in b.samples] == [i // 4 for i in range(8)]
        assert [x.completion_ids for x in a.samples] == [x.completion_ids for x in b.samples]
        assert [x.policy_version for x in a.samples] == [x.policy_version for x in b.samples]
        assert a.metrics["async/staleness_max"] == b.metrics["async/staleness_max"] == min(s, 1)
        # a worker runs one round at a time: its calls serve one batch, whose counters are exactly its tokens;
        # in process the two batches in flight share continuous-batching sessions, counted whole in each
        sampled = sum(sum(x.loss_mask) for x in b.samples)
        assert b.metrics["gen/tokens"] == sampled <= a.metrics["gen/tokens"]
