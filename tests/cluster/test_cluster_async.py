"""``rollout.mode=async`` on Ray with 2 rollout workers and a policy worker: staleness 0 equals the
synchronous Ray trainer bit for bit; staleness 1 keeps its bound, and trains every prompt once, in
stream order. The session's one local Ray (tests/conftest.py ``ray_cluster``); the RL tests' tiny models."""
import pytest

from tests.cluster.test_cluster_step import assert_same_steps, config, even_share, run
from tests.rl.conftest import one_thread  # noqa: F401 (autouse: tiny models on one thread)
from tests.rl.test_async import hold_updates_until_the_next_batch_is_made
from trajkit.cluster import ClusterTrainer

pytestmark = pytest.mark.usefixtures("ray_cluster")
RAY = ("cluster.ray=true", "cluster.rollout_workers=2")


def test_async_staleness_zero_on_ray_equals_the_sync_ray_step(tmp_path):
    """Against the synchronous Ray trainer (not the in-process one: on this machine the Ray run's step-0
    engine log-probs already differ from the in-process run's in the last bit, on main too; see
    test_cluster_step.py)."""
    ref = ClusterTrainer(config(tmp_path, "sync", *RAY), logger=False, reward_funcs=[even_share])
    try:
        ref_steps, ref_weights = run(ref, 3)
    finally:
        ref.close()
    trainer = ClusterTrainer(config(tmp_path, "ray", *RAY, "rollout.mode=async", "rollout.max_staleness=0"),
                             logger=False, reward_funcs=[even_share])
    try:
        steps, got = run(trainer, 3)
    finally:
        trainer.close()
    assert_same_steps(ref_steps, steps, unequal=("time/", "share/", "gen/tokens_per_s", "gen/target_calls", "async/"))
    assert all(s.metrics["async/staleness_max"] == 0 for s in steps)
    for name, value in ref_weights.items():
        assert (got[name] == value).all(), name


def test_async_staleness_one_on_ray_holds_the_bound_and_uses_every_prompt_once(tmp_path):
    cfg = config(tmp_path, "ray1", *RAY, "rollout.mode=async", "rollout.max_staleness=1")
    trainer = ClusterTrainer(cfg, logger=False, reward_funcs=[even_share])
    hold_updates_until_the_next_batch_is_made(trainer, 4)
    try:
        steps, _ = run(trainer, 4)
        task = trainer.state.task
    finally:
        trainer.close()
    p, g = cfg.rollout.prompts_per_step, cfg.rollout.group_size
    for i, result in enumerate(steps):
        assert [s.prompt_ids for s in result.samples] == \
            [task.prompt(j).ids for j in range(i * p, (i + 1) * p) for _ in range(g)]
        assert result.metrics["async/staleness_max"] <= 1 and result.metrics["async/dropped_stale"] == 0
    assert [s.metrics["async/staleness_max"] for s in steps] == [0, 1, 1, 1]  # the workers ran one batch ahead
