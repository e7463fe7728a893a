"""NCCL weight transfer to vLLM rollout workers (vLLM 0.32's weight-transfer API): needs CUDA, a CUDA vLLM venv
(``TRAJKIT_VLLM_PYTHON``) and vLLM importable by the policy worker (``cluster.policy_python``); skipped here.

What it checks where it runs: a Ray step with ``cluster.weight_transfer=nccl`` samples, after the sync, the
same greedy tokens as the object-store path on the same weights (the transfer is lossless)."""
import os

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_nccl_sync_gives_the_object_store_sync_s_greedy_samples(tmp_path, smollm2_folder, ray_cluster):
    common = ["policy.source=path", f"policy.path={smollm2_folder}", "policy.device=cuda", "rollout.backend=vllm",
              "rollout.temperature=1e-6", "steps=2", "cluster.ray=true", "cluster.rollout_workers=1",
              "cluster.worker_gpus=0.3", "log.report_to=[]"]
    runs = _greedy_samples_per_transfer(common, tmp_path)
    assert runs["nccl"] == runs["object_store"]


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="a sharded gang needs a GPU per policy worker (2)")
def test_nccl_sync_from_a_sharded_gang_gives_the_object_store_sync_s_greedy_samples(tmp_path, smollm2_folder,
                                                                                     ray_cluster):
    """cluster.policy_workers=2 policy.fsdp=true: every gang rank joins each parameter's gather, rank 0
    broadcasts (trajkit.cluster.nccl.ShardSource); the samples equal the object-store path's. Written against
    vLLM 0.32's API; never run on this project's machines (no GPU)."""
    common = ["policy.source=path", f"policy.path={smollm2_folder}", "policy.device=cuda", "policy.fsdp=true",
              "rollout.backend=vllm", "rollout.temperature=1e-6", "steps=2", "cluster.ray=true",
              "cluster.policy_workers=2", "cluster.rollout_workers=1", "cluster.worker_gpus=0.3",
              "draft.distill=false", "log.report_to=[]"]
    runs = _greedy_samples_per_transfer(common, tmp_path)
    assert runs["nccl"] == runs["object_store"]


def _greedy_samples_per_transfer(common: list[str], tmp_path) -> dict[str, list]:
    """Two Ray steps' sampled ids with ``common`` overrides, once per weight transfer (object store, NCCL)."""
    from trajkit.cluster import ClusterTrainer
    from trajkit.rl.config import load_config

    python = os.environ.get("TRAJKIT_POLICY_PYTHON")
    if not python:
        pytest.skip("set TRAJKIT_POLICY_PYTHON to a python with vLLM 0.32 (CUDA) and trajkit")
    runs = {}
    for transfer in ("object_store", "nccl"):
        cfg = load_config("grpo_smollm2", common + [f"cluster.weight_transfer={transfer}",
                                                    f"cluster.policy_python={python}",
                                                    f"log.out_dir={tmp_path / transfer}"])
        trainer = ClusterTrainer(cfg, logger=False)
        try:
            runs[transfer] = [[s.completion_ids for s in trainer.step_once().samples] for _ in range(2)]
        finally:
            trainer.close()
    return runs
