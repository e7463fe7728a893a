"""``cluster.policy_workers=2`` with ``policy.fsdp=true``: a gang of two Ray policy actors sharding the policy
with FSDP2 (one gloo process group) trains as the in-process trainer does, to the tolerance of the torchrun
tests (tests/rl/test_fsdp.py: float32 sums in another order, so 1e-6 on the weights, 1e-5 relative on the
metrics); its checkpoint has the sharded layout and resumes in one process; a killed policy worker fails
the next step naming it, within ``cluster.timeout_s``."""
import time

import pytest
import torch

from tests.rl.conftest import TINY, one_thread  # noqa: F401 (autouse: tiny models on one thread)
from trajkit.cluster import ClusterError, ClusterTrainer
from trajkit.errors import ConfigError
from trajkit.models.load import load_model
from trajkit.rl.config import load_config
from trajkit.rl.trainer import Trainer

GANG = ("cluster.ray=true", "cluster.rollout_workers=1", "cluster.policy_workers=2", "policy.fsdp=true")
COMMON = ("steps=2", "shaping.control=random", "loss.kl_coef=0.05", "optim.micro_batch_size=2")
COMPARED = ("reward/raw", "loss/pg", "loss/grad_norm", "loss/kl_ref", "mismatch/mean_abs", "gen/tokens")


def config(tmp_path, name, *overrides):
    return load_config(None, TINY + [f"log.out_dir={tmp_path / name}", *COMMON, *overrides])


@pytest.fixture(scope="module")
def gang_run(ray_cluster, tmp_path_factory):
    """2 steps of a gang and a checkpoint; then policy worker 1 killed and a third step tried: -> (metrics,
    checkpoint path, the third step's error, seconds it took to come)."""
    import ray

    tmp_path = tmp_path_factory.mktemp("gang")
    gang = ClusterTrainer(config(tmp_path, "gang", *GANG, "steps=3", "cluster.timeout_s=60"), logger=False)
    try:
        got = [gang.step_once().metrics for _ in range(2)]
        path = gang.save(str(tmp_path / "ckpt"))
        ray.kill(gang.cluster.gang[1])
        start = time.monotonic()
        with pytest.raises(ClusterError) as failed:
            gang.step_once()
        waited = time.monotonic() - start
    finally:
        gang.close()
    return got, path, str(failed.value), waited


def test_a_gang_of_two_policy_workers_equals_the_in_process_trainer(tmp_path, gang_run):
    got, path, _, _ = gang_run
    ref = Trainer(config(tmp_path, "ref"), logger=False)
    want = [ref.step_once().metrics for _ in range(2)]
    for a, b in zip(want, got):
        for key in COMPARED:
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-7), key
    saved = load_model(f"{path}/policy", what="the gang's policy/").state_dict()
    for name, tensor in ref.state.side.policy.state_dict().items():
        torch.testing.assert_close(saved[name], tensor, atol=1e-6, rtol=0, msg=name)
    one = Trainer(config(tmp_path, "one", "steps=3", f"checkpoint.resume_from={path}"), logger=False)
    assert one.step == 2
    for name, tensor in ref.state.side.policy.state_dict().items():
        torch.testing.assert_close(one.state.side.policy.state_dict()[name], tensor, atol=1e-6, rtol=0, msg=name)


def test_a_killed_policy_worker_fails_the_step_naming_it(gang_run):
    _, _, message, waited = gang_run
    assert "policy worker 1" in message and "died" in message, message
    assert waited < 60  # cluster.timeout_s


LOGRA = ("optim.name=logra", "optim.logra.rank=8", "optim.minibatches=2")


def test_logra_on_a_gang_equals_the_in_process_trainer(ray_cluster, tmp_path):
    """LoGRA sharded over the gang (its sketches reduce-scattered to each actor's rows, RowAdam state per
    shard; tests/rl/test_fsdp.py's torchrun arm) trains as in process: 2 steps of 2 optimiser steps each."""
    gang = ClusterTrainer(config(tmp_path, "gang", *GANG, *LOGRA), logger=False)
    try:
        got = [gang.step_once().metrics for _ in range(2)]
        path = gang.save(str(tmp_path / "ckpt"))
    finally:
        gang.close()
    ref = Trainer(config(tmp_path, "ref", *LOGRA), logger=False)
    want = [ref.step_once().metrics for _ in range(2)]
    for a, b in zip(want, got):
        for key in COMPARED:
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-7), key
    saved = load_model(f"{path}/policy", what="the gang's policy/").state_dict()
    start = Trainer(config(tmp_path, "start", *LOGRA), logger=False).state.side.policy.state_dict()
    key = "model.layers.0.mlp.up_proj.weight"  # a sketched matrix: it moved, far beyond the tolerance
    assert float((saved[key] - start[key]).abs().max()) > 1e-4
    for name, tensor in ref.state.side.policy.state_dict().items():
        torch.testing.assert_close(saved[name], tensor, atol=1e-6, rtol=0, msg=name)


def test_a_gang_may_send_by_nccl_to_vllm_rollouts(tmp_path):
    """Under torchrun these are refused (tests/rl/test_fsdp.py); a gang's rollout workers are any Ray run's, and
    its NCCL send is trajkit.cluster.nccl's (run only on GPUs: tests/cluster/test_nccl.py)."""
    cfg = config(tmp_path, "x", *GANG, "rollout.backend=vllm", "cluster.weight_transfer=nccl",
                 "cluster.worker_gpus=0.5")
    assert (cfg.cluster.weight_transfer, cfg.rollout.backend) == ("nccl", "vllm")


@pytest.mark.parametrize("overrides, match", [
    (("cluster.ray=true", "cluster.policy_workers=2"), r"cluster\.policy_workers=2 .* set policy\.fsdp=true"),
    (("cluster.ray=true", "policy.fsdp=true"), r"cluster\.policy_workers=N"),
    (("cluster.policy_workers=2", "policy.fsdp=true"), r"cluster\.policy_workers is a setting of a Ray run")])
def test_gang_settings_are_checked(tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match):
        config(tmp_path, "x", *overrides)
