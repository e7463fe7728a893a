"""On-policy distillation (:mod:`trajkit.rl.distill`): the loss and its gradient against hand-derived values, the
per-token path equal to the per-sequence one bit for bit, every refusal naming its key, and tiny in-process and
asynchronous runs in which a teacher equal to the student gives no signal and another one is approached."""
import math

import pytest
import torch

from trajkit.errors import ConfigError
from trajkit.models.tokenizer import bpe_tokenizer, byte_tokenizer
from trajkit.rl.build import random_model
from trajkit.rl.distill import load_teacher, opd_advantages, tokenizer_difference
from trajkit.rl.losses import LossNorm, policy_loss
from trajkit.rl.trainer import Trainer

OLD = torch.tensor([[-1.0, -2.0, -0.5], [-1.5, -0.2, 0.0]])      # [B=2, T=3]; row 1's last token is padding
TEACHER = torch.tensor([[-0.5, -2.5, -0.5], [-3.0, -0.1, -9.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
DELTA = torch.tensor([[0.3, 0.1, -0.1], [-0.3, -0.4, 0.0]])      # logp - old_logp, so the ratios are e^DELTA


def _loss(advantages, name="grpo"):
    logp = (OLD + DELTA).clone().requires_grad_(True)
    norm = LossNorm(num_seqs=2, num_tokens=5, max_tokens=3)
    loss, _ = policy_loss(name, logp, OLD, advantages, MASK, norm, 0.2, 0.2)
    loss.backward()
    return loss, logp.grad


def test_opd_advantage_is_minus_the_reverse_kl_per_token():
    adv = opd_advantages(OLD, TEACHER, MASK, torch.tensor([5.0, -5.0]), coef=1.0)
    # -(old - teacher) at the sampled tokens; the padded token 0; the group advantage weighted 0
    assert adv.tolist() == [[0.5, -0.5, 0.0], [-1.5, pytest.approx(0.1), 0.0]]


def test_opd_loss_and_gradient_equal_the_hand_derived_values():
    """grpo: mean over each row's tokens, then over rows; per token -min(r A, clip(r, 0.8, 1.2) A)."""
    adv = opd_advantages(OLD, TEACHER, MASK, torch.zeros(2), coef=2.0)
    assert adv.tolist() == [[1.0, -1.0, 0.0], [-3.0, pytest.approx(0.2), 0.0]]
    loss, grad = _loss(adv)
    # row 0: A=+1 at r=e^.3 > 1.2 (clipped: -1.2 A), A=-1 at r=e^.1 (unclipped: -r A = e^.1), A=0; mean over 3
    # row 1: A=-3 at r=e^-.3 < 0.8 (clipped: -0.8 A = 2.4), A=+0.2 at r=e^-.4 (unclipped: -0.2 e^-.4); mean over 2
    row0 = (-1.2 + math.exp(0.1) + 0.0) / 3
    row1 = (2.4 - 0.2 * math.exp(-0.4)) / 2
    assert float(loss.detach()) == pytest.approx((row0 + row1) / 2, rel=1e-6)
    # d/dlogp of -r A is -r A where unclipped, 0 where the clip acts; / tokens of the row / rows
    expected = [[0.0, math.exp(0.1) / 3 / 2, 0.0], [0.0, -0.2 * math.exp(-0.4) / 2 / 2, 0.0]]
    for got, want in zip(grad.flatten().tolist(), sum(expected, [])):
        assert got == pytest.approx(want, rel=1e-6, abs=1e-12)


def test_opd_mixed_with_the_reward_adds_the_group_advantage():
    adv = opd_advantages(OLD, TEACHER, MASK, torch.tensor([2.0, -1.0]), coef=1.0, reward_coef=0.5)
    assert adv.tolist() == [[1.5, 0.5, 1.0], [-2.0, pytest.approx(-0.4), 0.0]]
    loss, _ = _loss(adv, "dapo")  # token mean over the batch's 5 tokens, clip 0.8/1.2
    # clipped: A=1.5 at e^.3 > 1.2, A=-2 at e^-.3 < 0.8, A=-0.4 at e^-.4 < 0.8; the others -r A
    per_token = [-1.2 * 1.5, -0.5 * math.exp(0.1), -1.0 * math.exp(-0.1), 0.8 * 2.0, 0.8 * 0.4]
    assert float(loss.detach()) == pytest.approx(sum(per_token) / 5, rel=1e-6)


@pytest.mark.parametrize("name", ["grpo", "dapo", "dr_grpo"])
def test_per_token_advantages_equal_per_sequence_ones_bitwise(name):
    """A per-token advantage equal along each row is the per-sequence loss, loss and gradient bit for bit."""
    seq = torch.tensor([0.7, -1.3])
    loss_a, grad_a = _loss(seq, name)
    loss_b, grad_b = _loss(seq.unsqueeze(1).expand(2, 3).contiguous(), name)
    assert torch.equal(loss_a, loss_b) and torch.equal(grad_a, grad_b)


def test_gspo_refuses_per_token_advantages():
    with pytest.raises(AssertionError, match="advantages must be"):
        _loss(torch.zeros(2, 3), "gspo")


def _save(folder, model, tokenizer):
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _student_weights(cfg):
    """The tiny config's policy as it is built (random, init_seed): a teacher folder equal to the student."""
    return random_model(cfg.policy, len(byte_tokenizer()))


def _scaled(cfg, folder, scale: float):
    """The tiny policy's weights with the output layer scaled by ``scale`` (x30: a peaked model)."""
    model = _student_weights(cfg)
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)
    return _save(folder, model, byte_tokenizer())


# a peaked student (the random policy's output layer x30) and a flat teacher (the random policy as built):
# the reverse KL is mode-seeking, so the signal pushes the student's over-confident sampled tokens down
PEAKED = ("loss.name=dapo", "optim.lr=1e-2", "seed=3", "rollout.prompts_per_step=4", "rollout.group_size=8")


def _peaked_pair(tiny, tmp_path):
    cfg = tiny()
    return ("policy.source=path", f"policy.path={_scaled(cfg, tmp_path / 'student', 30.0)}",
            f"distill.teacher={_scaled(cfg, tmp_path / 'teacher', 1.0)}", *PEAKED)


def test_tokenizer_mismatch_is_refused_naming_the_key(tmp_path, tiny):
    cfg = tiny()
    model = _student_weights(cfg)
    bpe = _save(tmp_path / "bpe", model, bpe_tokenizer(vocab_size=300))
    with pytest.raises(ConfigError, match=r"distill\.teacher: its tokenizer differs .*vocabulary"):
        load_teacher(bpe, byte_tokenizer(), "cpu")
    other = byte_tokenizer()
    other.chat_template = other.chat_template.replace("<|im_start|>", "<|im_start|> ", 1)
    templ = _save(tmp_path / "template", model, other)
    with pytest.raises(ConfigError, match=r"distill\.teacher: .*chat template: first difference at line"):
        load_teacher(templ, byte_tokenizer(), "cpu")
    assert tokenizer_difference(byte_tokenizer(), other).startswith("chat template")
    with pytest.raises(ConfigError, match=r"distill\.teacher: .* is not a folder"):
        load_teacher(str(tmp_path / "absent"), byte_tokenizer(), "cpu")
    with pytest.raises(ConfigError, match=r"distill\.teacher: its tokenizer differs .*vocabulary"):
        Trainer(tiny(f"distill.teacher={bpe}"), logger=False)  # the trainer builds the side that refuses


def test_special_token_difference_is_named():
    other = byte_tokenizer()
    other.eos_token = "<|endoftext|>"
    assert tokenizer_difference(byte_tokenizer(), other).startswith("special tokens: eos_token")


@pytest.mark.parametrize("overrides, match", [
    (["loss.name=gspo"], r"distill\.teacher with loss\.name=gspo"),
    (["rollout.dynamic_sampling=true"], r"rollout\.dynamic_sampling with distill\.teacher"),
    (["policy.fsdp=true"], r"distill\.teacher with policy\.fsdp=true"),
])
def test_unsupported_combinations_are_refused_naming_the_key(tiny, overrides, match):
    with pytest.raises(ConfigError, match=match):
        tiny("distill.teacher=/nowhere", *overrides)


def test_distill_settings_without_a_teacher_are_refused(tiny):
    with pytest.raises(ConfigError, match=r"distill\.reward_coef is a setting of on-policy distillation"):
        tiny("distill.reward_coef=0.5")
    with pytest.raises(ConfigError, match=r"distill\.coef"):
        tiny("distill.teacher=/x", "distill.coef=0")
    tiny("distill.teacher=/x", "rollout.dynamic_sampling=true", "distill.reward_coef=1")  # the reward mixed in: fine


def _run(cfg, steps):
    t = Trainer(cfg, logger=False)
    try:
        return t, [t.step_once().metrics for _ in range(steps)]
    finally:
        t.close()


def test_a_teacher_equal_to_the_student_gives_every_advantage_zero(tmp_path, tiny):
    cfg = tiny()
    folder = _save(tmp_path / "same", _student_weights(cfg), byte_tokenizer())
    t, got = _run(tiny(f"distill.teacher={folder}"), 2)
    for m in got:
        assert m["distill/reverse_kl"] == 0.0 and m["loss/pg"] == 0.0 and m["loss/grad_norm"] == 0.0
        assert m["time/logprob/teacher"] > 0.0 and m["distill/teacher_logp"] < 0.0
    before = _student_weights(cfg).state_dict()
    assert all(torch.equal(before[k], v) for k, v in t.state.side.policy.state_dict().items())  # nothing moved


def test_the_students_reverse_kl_to_the_teacher_falls(tmp_path, tiny):
    _, got = _run(tiny(*_peaked_pair(tiny, tmp_path)), 14)
    kl = [m["distill/reverse_kl"] for m in got]
    assert kl[0] > 2.5, kl  # measured 3.02: the peaked student is far from the flat teacher
    assert sum(kl[-3:]) / 3 < 0.6 * sum(kl[:3]) / 3, kl  # measured 1.35 against 3.05
    assert all(m["distill/teacher_logp"] < 0 and m["time/logprob/teacher"] > 0 for m in got)


def test_an_async_run_at_staleness_zero_distils_as_the_synchronous_one_bitwise(tmp_path, tiny):
    pair = _peaked_pair(tiny, tmp_path)
    sync, expected = _run(tiny(*pair), 3)
    asyn, got = _run(tiny(*pair, "rollout.mode=async", "rollout.max_staleness=0"), 3)
    for a, b in zip(expected, got):
        for key in ("distill/reverse_kl", "distill/teacher_logp", "loss/pg", "loss/grad_norm"):
            assert a[key] == b[key], key
        assert b["async/staleness_max"] == 0
    assert all(torch.equal(p, asyn.state.side.policy.state_dict()[k]) for k, p in sync.state.side.policy.state_dict().items())
    assert expected[0]["loss/grad_norm"] > 0


def test_an_async_run_one_version_stale_takes_the_teacher(tmp_path, tiny):
    """The teacher scores the stale batches as they come; a teacher equal to the student still gives 0."""
    folder = _save(tmp_path / "same", _student_weights(tiny()), byte_tokenizer())
    _, got = _run(tiny(f"distill.teacher={folder}", "rollout.mode=async", "rollout.max_staleness=1",
                       "loss.decoupled=true"), 3)
    assert max(m["async/staleness_max"] for m in got) == 1
    assert all(m["distill/reverse_kl"] == 0.0 and m["loss/grad_norm"] == 0.0 for m in got)
    _, got = _run(tiny(*_peaked_pair(tiny, tmp_path), "rollout.mode=async", "rollout.max_staleness=1",
                       "loss.decoupled=true"), 3)
    assert [m["async/staleness_max"] for m in got] == [0, 1, 1]
    assert all(m["distill/reverse_kl"] != 0.0 and m["loss/grad_norm"] > 0 for m in got)
