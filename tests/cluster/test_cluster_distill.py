"""On-policy distillation on Ray: the policy worker loads the teacher beside the policy (its
:class:`~trajkit.rl.learner.PolicySide`), and the step equals the in-process one bit for bit (samples, losses,
``distill/*`` and the weights), on the session's one local Ray (tests/conftest.py ``ray_cluster``)."""
import pytest
import torch

from tests.cluster.test_cluster_step import assert_same_steps, config, even_share, run
from tests.rl.conftest import one_thread, tiny  # noqa: F401 (autouse: one thread; the tiny config)
from tests.rl.test_distill import _peaked_pair
from trajkit.cluster import ClusterTrainer
from trajkit.rl.trainer import Trainer

pytestmark = pytest.mark.usefixtures("ray_cluster")


@pytest.mark.parametrize("divergence", ["sampled", "forward_kl"])
def test_the_policy_worker_distils_as_the_in_process_learner(tmp_path, tiny, divergence):
    """With a whole-vocabulary divergence the teacher's distributions stay on the worker, between its
    ``logprob`` and ``policy_update`` calls."""
    pair = (*_peaked_pair(tiny, tmp_path), f"distill.divergence={divergence}")
    ref = Trainer(config(tmp_path, "local", *pair), logger=False, reward_funcs=[even_share])
    ref_steps, ref_weights = run(ref, 2)
    ref.close()
    trainer = ClusterTrainer(config(tmp_path, "ray", *pair, "cluster.ray=true", "cluster.rollout_workers=1"),
                             logger=False, reward_funcs=[even_share])
    try:
        steps, got = run(trainer, 2)
    finally:
        trainer.close()
    assert_same_steps(ref_steps, steps)
    assert all(s.metrics["distill/reverse_kl"] > 1.0 for s in steps)  # the teacher's signal, computed there
    assert all(torch.equal(got[k], ref_weights[k]) for k in ref_weights)
