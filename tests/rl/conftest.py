"""Tiny random models and a tiny run config shared by the RL tests (a step takes well under a second)."""
import pytest
import torch

from trajkit.progress import quiet_transformers

quiet_transformers()

TINY = ["policy.source=random", "policy.hidden_size=32", "policy.num_layers=1", "policy.num_heads=2",
        "policy.intermediate_size=64", "draft.model.hidden_size=16", "draft.model.num_heads=2",
        "draft.model.intermediate_size=32", "rollout.prompts_per_step=2", "rollout.group_size=4",
        "rollout.max_new_tokens=6", "optim.lr=1e-3", "optim.micro_batch_size=5", "task.name=copy", "task.copy.min_len=2",
        "task.copy.max_len=4", "threads=1", "log.report_to=[]", "log.dump_samples=2"]


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread (and the TINY config sets threads=1); restore afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def tiny(tmp_path):
    """``tiny(*overrides)`` -> a TrainConfig for a tiny random policy logging under tmp_path."""
    from trajkit.rl.config import load_config

    def make(*overrides):
        return load_config(None, TINY + [f"log.out_dir={tmp_path / 'run'}"] + list(overrides))
    return make
