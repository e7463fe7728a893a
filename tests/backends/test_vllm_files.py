"""What the vLLM backend writes to disk, and that none of it outlives it. A weight sync goes through a
safetensors file that vLLM reloads from (0.5 GB per sync for SmolLM2-135M); it is removed once read, and
``close`` removes the actor's folders and a policy folder trajkit wrote for it. Before this, every vLLM
backend a test session started left its folders in the temporary directory (7 GB after one day of runs),
until a CI run failed on a full disk."""
import os

import pytest
import torch

from trajkit.backends.build import BackendSpec
from trajkit.backends.vllm import from_spec


@pytest.fixture
def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                         tie_word_embeddings=True)
    return LlamaForCausalLM(config).eval()


def _files(folder: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(root, f), folder) for root, _, files in os.walk(folder) for f in files)


def test_syncs_leave_no_file_and_close_removes_every_folder(ray_cluster, vllm_python, tiny_llama):
    from trajkit.engine import SamplingParams

    backend = from_spec(BackendSpec(backend="vllm", python=vllm_python, max_model_len=128), target=tiny_llama)
    closed = False
    try:
        policy_folder = backend.owned_folder
        worker_folders = backend.folders()
        assert policy_folder is not None and "config.json" in os.listdir(policy_folder)
        assert worker_folders and all(os.path.isdir(f) for f in worker_folders)
        greedy = SamplingParams(temperature=0.0, max_new_tokens=4)
        before = backend.generate([[1, 2, 3]], greedy)[0].token_ids
        with torch.no_grad():
            for p in tiny_llama.parameters():
                p.add_(torch.randn_like(p))
        backend.update_weights(tiny_llama.state_dict())
        assert backend.generate([[1, 2, 3]], greedy)[0].token_ids != before  # the sync reached vLLM
        assert [f for folder in worker_folders for f in _files(folder)] == []  # and its file is gone
        backend.close()
        closed = True
        assert not os.path.exists(policy_folder)
        assert [f for f in worker_folders if os.path.exists(f)] == []
    finally:
        if not closed:
            backend.close()
