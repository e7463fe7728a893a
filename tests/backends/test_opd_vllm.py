"""On-policy distillation with rollouts from the vLLM backend: the teacher scores exactly the tokens vLLM sampled.

The teacher is SmolLM2-135M-Instruct with its final norm's weight halved: another model (flatter distributions,
0.75 nats a token from the student here) with the same tokenizer, made deterministically. The reference is one
plain float32 forward per sample, of the student as loaded from its folder and of the teacher, over the
sample's prompt + completion: the step's ``distill/reverse_kl`` and ``distill/teacher_logp`` (means over the
sampled tokens) must equal it (measured: within 1e-5). A teacher that scored other positions or other tokens
than vLLM's would be off by tenths of a nat."""
import shutil

import pytest
import torch

from tests.backends.conftest import reference_logprobs
from trajkit.models.load import load_model
from trajkit.rl.config import load_config
from trajkit.rl.trainer import Trainer


def _teacher(student_folder: str, out) -> str:
    """The student's folder with its final norm's weight halved (its tokenizer files copied as they are)."""
    shutil.copytree(student_folder, out, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "config.json"))
    model = load_model(student_folder, dtype=torch.float32)
    with torch.no_grad():
        model.model.norm.weight.mul_(0.5)
    model.save_pretrained(out)
    return str(out)


def test_opd_on_vllm_rollouts_scores_the_sampled_tokens(vllm_backend, vllm_python, smollm2_folder, reference_model,
                                                         tmp_path):
    teacher_folder = _teacher(smollm2_folder, tmp_path / "teacher")
    cfg = load_config("grpo_smollm2", [
        "rollout.backend=vllm", f"rollout.vllm_python={vllm_python}", "rollout.vllm_max_model_len=512",
        "loss.tis=true", "rollout.prompts_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=12",
        f"distill.teacher={teacher_folder}", "eval.every=0", "log.report_to=[]", f"log.out_dir={tmp_path / 'run'}",
        "steps=1", "optim.lr=1e-4"])
    teacher = load_model(teacher_folder, dtype=torch.float32).eval()
    trainer = Trainer(cfg, backend=vllm_backend)
    initial = {k: v.clone() for k, v in trainer.state.side.policy.state_dict().items()}
    try:
        step = trainer.step_once()
    finally:
        trainer.close()
        vllm_backend.update_weights(initial)  # the session's backend back to SmolLM2's own weights
    temperature = cfg.rollout.temperature
    student_lp, teacher_lp = [], []
    with torch.no_grad():
        for s in step.samples:
            keep = [i for i, m in enumerate(s.loss_mask) if m]
            assert keep, "a sample with no sampled token"
            for model, out in ((reference_model, student_lp), (teacher, teacher_lp)):
                lp = reference_logprobs(model, s.prompt_ids, s.completion_ids, temperature)
                out.extend(lp[i] for i in keep)
    n = len(student_lp)
    reverse_kl = sum(a - b for a, b in zip(student_lp, teacher_lp)) / n
    teacher_logp = sum(teacher_lp) / n
    m = step.metrics
    print(f"reverse KL {m['distill/reverse_kl']:.6f} (reference {reverse_kl:.6f}), teacher log-prob "
          f"{m['distill/teacher_logp']:.6f} (reference {teacher_logp:.6f}) over {n} sampled tokens")
    assert reverse_kl > 0.3  # the teacher is another model: a signal to check
    assert m["distill/reverse_kl"] == pytest.approx(reverse_kl, abs=1e-4), (m["distill/reverse_kl"], reverse_kl)
    assert m["distill/teacher_logp"] == pytest.approx(teacher_logp, abs=1e-4), (m["distill/teacher_logp"], teacher_logp)
    assert m["mismatch/alarm"] == 0.0
    assert vllm_backend.actor is not None  # not closed by the trainer
