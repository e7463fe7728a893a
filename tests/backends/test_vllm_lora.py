"""Adapter-only weight sync to vLLM: a LoRA policy's adapters (not its weights) go to a vLLM engine started
with LoRA on (``lora_rank``), which applies them over the base model it loaded. Reference: the peft model's
adapters merged into the base (``merge_and_unload``), its float32 forward at the sampling temperature; the
tolerance is the vLLM backend's ``LOGPROB_ATOL`` (1e-3; measured 3.4e-5 for an r=8 adapter on SmolLM2). A
second sync must replace the first adapter, not leave vLLM's cached one in use.
"""
import copy

import pytest
import torch

from tests.backends.conftest import reference_logprobs
from trajkit.backends.vllm import LOGPROB_ATOL, VllmBackend, lora_slot, peft_layout
from trajkit.engine import SamplingParams
from trajkit.rl.config import LoRAConfig
from trajkit.rl.lora import adapter_of, inference_copy, wrap

RANK = 8


@pytest.fixture(scope="module")
def lora_backend(ray_cluster, vllm_python, smollm2_folder):
    backend = VllmBackend(smollm2_folder, python=vllm_python, max_model_len=256, seed=0, lora_rank=RANK)
    yield backend
    backend.close()


def _policy(reference_model, seed: int):
    """SmolLM2 with an r=8 peft adapter on attention and MLP, B drawn (not peft's zero init) so it matters."""
    policy = wrap(copy.deepcopy(reference_model), LoRAConfig(rank=RANK, alpha=16.0, targets=["attention", "mlp"],
                                                            seed=seed))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    return policy


def _max_gap(model, prompts, out, temperature):
    return max(max(abs(a - b) for a, b in zip(reference_logprobs(model, p, c.token_ids, temperature), c.logprobs))
               for p, c in zip(prompts, out))


def test_adapter_sync_reproduces_the_merged_models_logprobs(lora_backend, reference_model, prompts):
    params = SamplingParams(temperature=1.0, max_new_tokens=8, seed=3)
    base_out = lora_backend.generate(prompts, params)
    for seed, version in ((1, 1), (2, 2)):
        policy = _policy(reference_model, seed)
        assert lora_backend.update_adapter(adapter_of(policy)) == version
        out = lora_backend.generate(prompts, params)
        merged = inference_copy(policy)
        assert _max_gap(merged, prompts, out, 1.0) <= LOGPROB_ATOL
        # the adapter matters: the base model is far from these samples' log-probs
        assert _max_gap(reference_model, prompts, out, 1.0) > 100 * LOGPROB_ATOL
    assert [c.token_ids for c in out] != [c.token_ids for c in base_out]


def test_the_peft_layout_and_rank_slot():
    a, b = torch.ones(2, 3), torch.zeros(4, 2)
    from trajkit.engine.adapters import LoraAdapter

    tensors, config = peft_layout(LoraAdapter({"model.layers.0.self_attn.q_proj": (a, b)}, scale=8.0))
    assert set(tensors) == {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
                            "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"}
    assert config["r"] == 2 and config["lora_alpha"] == 16.0 and config["target_modules"] == ["q_proj"]
    assert [lora_slot(r) for r in (1, 2, 8, 9, 32, 512)] == [1, 8, 8, 16, 32, 512]
