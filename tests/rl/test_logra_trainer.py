"""``optim.name=logra`` in the RL trainer: sketched targets move without ever holding a gradient, the KL
budget is applied per optimiser step, the frozen reference stays put, and resuming is bitwise."""
import pytest
import torch

from trajkit.errors import ConfigError
from trajkit.optim import LoGRA, exact_kl
from trajkit.rl.batching import batch_logprobs, collate, forward_logits
from trajkit.rl.build import random_model
from trajkit.envs.sample import Sample
from trajkit.rl.trainer import Trainer
from trajkit.rl.update import make_optimizer, update_policy

# the overlong penalty gives a random policy's samples different rewards, hence non-zero advantages
LOGRA = ("optim.name=logra", "optim.logra.rank=8", "optim.logra.kl_budget=1e-3", "loss.kl_coef=0.01",
         "optim.lr=3e-2", "shaping.overlong_buffer=3")


def test_trainer_steps_with_logra_and_a_kl_budget(tiny):
    trainer = Trainer(tiny(*LOGRA), logger=False)
    state = trainer.state
    assert isinstance(state.side.optimizer, LoGRA)
    targets = [s.weight for s in state.side.optimizer.sketches.states]
    assert len(targets) == 7  # one layer: q, k, v, o, gate, up, down
    before = [w.detach().clone() for w in targets]
    ref_before = state.side.reference.model.layers[0].self_attn.q_proj.weight.detach().clone()
    for _ in range(2):
        metrics = trainer.step_once().metrics
    assert all(w.grad is None for w in targets)
    assert all(not torch.equal(w, b) for w, b in zip(targets, before))
    assert 0 < metrics["optim/kl_scale"] <= 1 and metrics["optim/kl_pred"] > 0
    assert state.side.optimizer.last["predicted_kl"] * state.side.optimizer.last["scale"] ** 2 <= 1e-3 * (1 + 1e-6)
    assert torch.equal(state.side.reference.model.layers[0].self_attn.q_proj.weight, ref_before)


def test_logra_resume_reproduces_the_next_step(tiny, tmp_path):
    straight = Trainer(tiny(*LOGRA), logger=False)
    for _ in range(3):
        expected = straight.step_once()
    first = Trainer(tiny(*LOGRA), logger=False)
    for _ in range(2):
        first.step_once()
    path = first.save(str(tmp_path / "ckpt"))
    resumed = Trainer(tiny(*LOGRA, f"checkpoint.resume_from={path}"), logger=False)
    got = resumed.step_once()
    assert got.metrics["loss/pg"] == expected.metrics["loss/pg"]
    for a, b in zip(straight.state.side.policy.state_dict().values(), resumed.state.side.policy.state_dict().values()):
        assert torch.equal(a, b)


def test_update_policy_keeps_the_tempered_policy_within_the_budget(tiny):
    """One optimiser step over two micro-batches at temperature 0.7: the KL between the tempered policy
    before and after, over the sampled tokens, is within the budget x 1.2 (the second-order prediction's
    tolerance, see tests/optim/test_kl.py) and the step was scaled down to get there."""
    cfg = tiny(*LOGRA, "rollout.temperature=0.7", "optim.micro_batch_size=2")
    policy = random_model(cfg.policy, vocab_size=259)
    g = torch.Generator().manual_seed(0)
    samples = [Sample([1, 2, 3], torch.randint(3, 259, (n,), generator=g).tolist(), [-1.0] * n, [1] * n)
               for n in (5, 6, 4, 6)]
    batch = collate(samples, torch.tensor([1.0, -1.0, 0.5, -0.5]), pad_id=0)
    old, _ = batch_logprobs(policy, batch, cfg.rollout.temperature, 8)
    optimizer = make_optimizer(policy, cfg)
    with torch.no_grad():
        before = forward_logits(policy, batch) / 0.7
    metrics = update_policy(policy, optimizer, batch, old, None, cfg)
    assert metrics["optim/kl_scale"] < 1
    with torch.no_grad():
        after = forward_logits(policy, batch) / 0.7
    total, n = exact_kl(before, after, batch.mask)
    assert 1e-3 * 0.8 < total / n < 1e-3 * 1.2


def test_logra_with_float16_loss_scaling_is_refused_with_the_reason(tiny):
    """GradScaler unscales and inf-checks ``.grad`` only; LoGRA's sketches would be stepped scaled."""
    cfg = tiny(*LOGRA)
    cfg.policy.dtype = "float16"  # set after the per-section checks, which refuse float16 without CUDA
    with pytest.raises(ConfigError, match="loss scaler unscales and checks only .grad"):
        cfg.validate()
    cfg.policy.dtype = "bfloat16"
    cfg.validate()


def test_trainer_steps_with_logra_under_bfloat16_autocast(tiny):
    """Sketches and the vocabulary gradient take bfloat16 output gradients (the backward casts the float32
    master weight to multiply them); every weight moves and stays finite."""
    trainer = Trainer(tiny(*LOGRA, "policy.dtype=bfloat16"), logger=False)
    policy = trainer.state.side.policy
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    trainer.step_once()
    trainer.step_once()
    for name, p in policy.named_parameters():
        assert torch.isfinite(p).all(), name
        if name.endswith(("proj.weight", "embed_tokens.weight", "lm_head.weight")):
            assert not torch.equal(p, before[name]), name
