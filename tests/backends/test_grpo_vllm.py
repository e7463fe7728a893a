"""GRPO on SmolLM2 with rollouts from the vLLM backend: the mismatch metric is logged and small, TIS is
on, and after the weight sync the second step samples from the updated weights (its log-probs agree with
the updated policy, not the initial one)."""
import copy

import torch

from trajkit.backends.vllm import VllmBackend
from trajkit.rl.batching import batch_logprobs, collate
from trajkit.rl.config import load_config
from trajkit.rl.trainer import Trainer

MISMATCH_BOUND = 1e-3  # measured mean |dlogp| 5.8e-6, max 3.3e-5 on this CPU (docs/backends.md)


def _logp(model, samples, cfg, tokenizer):
    advantages = torch.tensor([s.advantage for s in samples], dtype=torch.float32)
    batch = collate(samples, advantages, tokenizer.pad_token_id)
    logp, _ = batch_logprobs(model, batch, cfg.rollout.temperature, cfg.optim.micro_batch_size)
    return logp, batch


def _model_at(policy, weights):
    model = copy.deepcopy(policy).eval()
    model.load_state_dict(weights)
    return model


def test_grpo_steps_on_the_vllm_backend(vllm_backend, vllm_python, tmp_path):
    """On the session's vLLM backend (one vLLM engine per test session); the trainer checks that it is the
    kind ``rollout.backend`` names and leaves it open."""
    cfg = load_config("grpo_smollm2", [
        "rollout.backend=vllm", f"rollout.vllm_python={vllm_python}", "rollout.vllm_max_model_len=512",
        "loss.tis=true", "rollout.prompts_per_step=2", "rollout.group_size=4", "rollout.max_new_tokens=16",
        "eval.every=0", "log.report_to=[]", f"log.out_dir={tmp_path}", "steps=2", "optim.lr=1e-4"])
    trainer = Trainer(cfg, backend=vllm_backend)
    start_version = vllm_backend.policy_version
    try:
        s = trainer.state
        assert isinstance(s.rollout.backend, VllmBackend)
        initial = {k: v.clone() for k, v in s.side.policy.state_dict().items()}
        first = trainer.step_once()
        m = first.metrics
        assert 0.0 <= m["mismatch/mean_abs"] < MISMATCH_BOUND, m["mismatch/mean_abs"]
        assert m["mismatch/alarm"] == 0.0 and "tis/weight_mean" in m
        assert abs(m["tis/weight_mean"] - 1.0) < 1e-2
        assert any(not torch.equal(initial[k], v) for k, v in s.side.policy.state_dict().items())

        updated = {k: v.clone() for k, v in s.side.policy.state_dict().items()}
        second = trainer.step_once()  # weight_sync pushed the updated policy into vLLM first
        assert s.rollout.backend.policy_version == start_version + 2
        assert {x.policy_version for x in second.samples} == {start_version + 2}
        new_logp, batch = _logp(_model_at(s.side.policy, updated), second.samples, cfg, s.tokenizer)
        old_logp, _ = _logp(_model_at(s.side.policy, initial), second.samples, cfg, s.tokenizer)
        mask = batch.mask.bool()
        to_new = (batch.engine_logp - new_logp)[mask].abs().mean()
        to_old = (batch.engine_logp - old_logp)[mask].abs().mean()
        assert to_new < MISMATCH_BOUND and to_old > 10 * to_new, (float(to_new), float(to_old))
        print(f"vLLM mismatch/mean_abs step 1 {m['mismatch/mean_abs']:.2e} max_abs {m['mismatch/max_abs']:.2e}; "
              f"step 2 vs updated {float(to_new):.2e}, vs initial {float(to_old):.2e}")
    finally:
        trainer.close()
        vllm_backend.update_weights(initial)  # the session's backend back to SmolLM2's own weights
    assert vllm_backend.actor is not None  # not closed by the trainer
