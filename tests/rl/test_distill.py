"""On-policy distillation (:mod:`trajkit.rl.distill`): the loss and its gradient against hand-derived values, the
per-token path equal to the per-sequence one bit for bit, every refusal naming its key, and tiny in-process and
asynchronous runs in which a teacher equal to the student gives no signal and another one is approached."""
import math
from dataclasses import replace

import pytest
import torch

from trajkit.envs.sample import Sample
from trajkit.errors import ConfigError
from trajkit.models.tokenizer import bpe_tokenizer, byte_tokenizer
from trajkit.rl.batching import batch_logprobs, collate
from trajkit.rl.build import random_model
from trajkit.rl.config import load_config
from trajkit.rl.distill import load_teacher, opd_advantages, score_with_teacher, token_divergence, tokenizer_difference
from trajkit.rl.losses import LossNorm, policy_loss
from trajkit.rl.trainer import Trainer
from trajkit.rl.update import update_policy

from .conftest import TINY

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


@pytest.mark.parametrize("divergence", ["sampled", "forward_kl"])
def test_an_agent_step_distils_on_the_stitched_samples_sampled_tokens(tmp_path, tiny, divergence):
    """Through the gateway: two chat turns per episode, so each stitched sample holds forced tokens (the second
    user message, template glue) between sampled ones. The teacher scores the sampled tokens only, in the
    context of everything before them: ``distill/reverse_kl`` and ``distill/teacher_logp`` equal means over the
    samples' ``loss_mask`` tokens of log-probs recomputed per sample, at the rollout temperature, from the
    student before the step and the teacher folder."""
    import copy

    from tests.envs.test_agent import ROWS, odd_length, two_turns
    from trajkit.envs.agent import AgentTask
    from trajkit.models.load import load_model

    student, teacher = _peaked_pair(tiny, tmp_path)[1:3]
    cfg = tiny("policy.source=path", student, teacher, f"distill.divergence={divergence}", "rollout.group_size=2",
               "optim.micro_batch_size=8", "rollout.temperature=0.8")
    task = AgentTask(ROWS, byte_tokenizer(), two_turns, reward_funcs=[odd_length])
    trainer = Trainer(cfg, task=task, logger=False)
    before = copy.deepcopy(trainer.state.side.policy)
    try:
        result = trainer.step_once()
    finally:
        trainer.close()
    reference = load_model(teacher.split("=", 1)[1], dtype=torch.float32).eval()
    kl = teacher_sum = 0.0
    count = forced = 0
    with torch.no_grad():
        for s in result.samples:
            ids = torch.tensor([s.prompt_ids + s.completion_ids])
            target = torch.tensor(s.completion_ids).unsqueeze(-1)
            lp = [torch.log_softmax(m(input_ids=ids).logits[0, len(s.prompt_ids) - 1:-1].double() / 0.8, -1)
                  .gather(-1, target).squeeze(-1) for m in (before, reference)]
            sampled = torch.tensor(s.loss_mask, dtype=torch.bool)
            kl += float((lp[0] - lp[1])[sampled].sum())
            teacher_sum += float(lp[1][sampled].sum())
            count += int(sampled.sum())
            forced += int((~sampled[int(sampled.nonzero()[0]):]).sum())
    assert forced > 0  # the second turn's forced tokens are there, and out of the means
    assert result.metrics["distill/reverse_kl"] == pytest.approx(kl / count, rel=1e-4)
    assert result.metrics["distill/teacher_logp"] == pytest.approx(teacher_sum / count, rel=1e-4)
    assert result.metrics["loss/grad_norm"] > 0


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


# ---- whole-vocabulary divergences (distill.divergence=reverse_kl | forward_kl) ----

def test_token_divergences_and_their_gradients_equal_the_hand_derived_values():
    """p_s = softmax(z) with z = log(0.5, 0.3, 0.2) and p_t = (0.2, 0.2, 0.6):
    reverse KL = sum p_s log(p_s / p_t), d/dz_k = p_s,k (log(p_s,k / p_t,k) - KL);
    forward KL = sum p_t log(p_t / p_s), d/dz_k = p_s,k - p_t,k."""
    ps, pt = [0.5, 0.3, 0.2], [0.2, 0.2, 0.6]
    rkl = sum(a * math.log(a / b) for a, b in zip(ps, pt))
    fkl = sum(b * math.log(b / a) for a, b in zip(ps, pt))
    assert rkl == pytest.approx(0.5 * math.log(2.5) + 0.3 * math.log(1.5) + 0.2 * math.log(1 / 3))
    for kind, value, grad in (("reverse_kl", rkl, [a * (math.log(a / b) - rkl) for a, b in zip(ps, pt)]),
                              ("forward_kl", fkl, [a - b for a, b in zip(ps, pt)])):
        z = torch.log(torch.tensor([ps], dtype=torch.float64)).requires_grad_(True)
        div = token_divergence(kind, torch.log_softmax(z, -1), torch.log(torch.tensor([pt], dtype=torch.float64)))
        assert float(div.detach()) == pytest.approx(value, rel=1e-12)
        div.sum().backward()
        assert z.grad[0].tolist() == pytest.approx(grad, rel=1e-9, abs=1e-12)
    with pytest.raises(ValueError, match="no whole-vocabulary divergence 'sampled'"):
        token_divergence("sampled", z, z)


PREFIX = list(range(1, 11))  # 10 prompt tokens every row shares: the update forwards them once (shared prefix)


def _stitched_samples(gen, shared: bool = False):
    """Five samples with forced tokens between sampled ones and prompts of several lengths; ``shared``: every
    prompt starts with :data:`PREFIX` (long enough for the shared-prefix forward)."""
    samples = []
    for n, prompt in ((5, [1, 2]), (3, [1, 2, 7]), (6, [1]), (4, [1, 2]), (5, [1, 2, 7])):
        ids = torch.randint(3, 250, (n,), generator=gen).tolist()
        samples.append(Sample((PREFIX if shared else []) + prompt, ids, [0.0] * n,
                              [1 if i % 3 != 2 else 0 for i in range(n)]))
    return samples


def _divergence_reference(policy, teacher, samples, kind, coef, per_row_mean, temperature=1.0, removed=()):
    """``coef`` x the divergence at every sampled position, each sequence forwarded alone (policy and teacher)
    at ``temperature``, both over the ids the two output layers share (renormalised there), 0 at the sampled
    positions ``removed`` ((row, completion index) pairs) which still count, averaged per row then over rows
    (grpo) or over all sampled tokens (dapo); -> (grads, value)."""
    policy.zero_grad(set_to_none=True)
    rows, total, count = [], 0.0, 0
    for r, s in enumerate(samples):
        ids = torch.tensor([s.prompt_ids + s.completion_ids])
        at = slice(len(s.prompt_ids) - 1, -1)
        logits = policy(input_ids=ids).logits[0, at].float() / temperature
        with torch.no_grad():
            target = teacher(input_ids=ids).logits[0, at].float() / temperature
        v = min(logits.shape[-1], target.shape[-1])
        student, target = torch.log_softmax(logits[:, :v], -1), torch.log_softmax(target[:, :v], -1)
        sampled = [i for i, m in enumerate(s.loss_mask) if m]
        div = token_divergence(kind, student[sampled], target[sampled])
        div = div * torch.tensor([0.0 if (r, i) in removed else 1.0 for i in sampled])
        rows.append(div.mean())
        total, count = total + div.sum(), count + len(sampled)
    value = sum(rows) / len(rows) if per_row_mean else total / count
    (coef * value).backward()
    return [p.grad.clone() for p in policy.parameters()], float(value.detach())


def _divergence_update(kind, loss_name, temperature=1.0, shared=False, teacher_vocab=259, extra=(), engine=None):
    """One ``update_policy`` (SGD at lr 0: the gradient only) of a tiny policy distilled from another tiny model
    through ``score_with_teacher``, beside the per-sequence reference; -> (got, want, metrics, value, batch)."""
    cfg = load_config(None, TINY + ["optim.micro_batch_size=2", "optim.grad_clip=1e9", "distill.teacher=/t",
                                    f"distill.divergence={kind}", "distill.coef=0.7", f"loss.name={loss_name}",
                                    f"rollout.temperature={temperature}", *extra])
    policy = random_model(cfg.policy, vocab_size=259)
    teacher = random_model(replace(cfg.policy, init_seed=cfg.policy.init_seed + 1), vocab_size=teacher_vocab).eval()
    samples = _stitched_samples(torch.Generator().manual_seed(0), shared)
    batch = collate(samples, torch.tensor([0.5, -1.0, 2.0, 0.25, -0.75]), pad_id=0)
    old, _ = batch_logprobs(policy, batch, temperature, 8)
    batch.engine_logp = (old if engine is None else engine(old)) * batch.mask
    batch, metrics = score_with_teacher(teacher, batch, old, cfg)
    assert batch.teacher_dists.shape == (int(batch.mask.sum()), teacher_vocab)
    update = update_policy(policy, torch.optim.SGD(policy.parameters(), lr=0.0), batch, old, None, cfg)
    got = [p.grad.clone() for p in policy.parameters()]
    return policy, teacher, samples, got, update, metrics, batch


@pytest.mark.parametrize("kind", ["reverse_kl", "forward_kl"])
@pytest.mark.parametrize("loss_name", ["grpo", "dapo"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_update_policy_divergence_gradient_equals_the_per_sequence_formula(kind, loss_name, temperature):
    """The teacher's distributions travel with the batch from the ``logprob`` stage; the update's gradient is
    ``coef`` x the divergence's, aggregated as the loss aggregates, over micro-batches of 2 rows."""
    policy, teacher, samples, got, update, metrics, batch = _divergence_update(kind, loss_name, temperature)
    assert torch.equal(batch.advantages, torch.zeros_like(batch.mask))  # reward_coef 0: the term is the signal
    want, value = _divergence_reference(policy, teacher, samples, kind, 0.7, loss_name == "grpo", temperature)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-6, rtol=1e-4)
    assert update["loss/distill"] == pytest.approx(value, rel=1e-5) and value > 0.01
    assert sum(float(g.norm()) for g in got) > 0.0
    # the sampled estimate is still logged: mean over sampled tokens of old - teacher at the sampled token
    assert metrics["distill/reverse_kl"] != 0.0


@pytest.mark.parametrize("packing", [False, True])
def test_the_divergence_through_the_shared_prefix_forward(monkeypatch, packing):
    """Every prompt starts with the same 10 tokens: the update and the teacher forward them once per micro-batch
    (:mod:`trajkit.rl.shared_prefix`), the rows padded or packed into one sequence (:mod:`trajkit.rl.packed`),
    and the gradient is the per-sequence one all the same."""
    import trajkit.rl.batching as batching
    from trajkit.rl import packed

    monkeypatch.setattr(packed, "ENABLED", packing)
    calls = []
    module, name = (packed, "packed_logits") if packing else (batching, "shared_prefix_logits")
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(1) or real(*a, **k))
    policy, teacher, samples, got, update, _, _ = _divergence_update("forward_kl", "grpo", 0.7, shared=True)
    # old log-probs 1 (5 rows at once), teacher 2 and update 2 (micro-batches of 2, 2, 1 rows: one row runs dense)
    assert len(calls) == 5
    want, value = _divergence_reference(policy, teacher, samples, "forward_kl", 0.7, True, 0.7)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-6, rtol=1e-4)
    assert update["loss/distill"] == pytest.approx(value, rel=1e-5)


def test_a_teacher_whose_output_layer_is_padded_larger_is_compared_on_the_shared_ids():
    """A teacher of 300 output rows beside a student of 259 (one tokenizer, padded layers): both distributions
    over ids 0..258, renormalised there."""
    policy, teacher, samples, got, update, _, _ = _divergence_update("reverse_kl", "dapo", teacher_vocab=300)
    want, value = _divergence_reference(policy, teacher, samples, "reverse_kl", 0.7, False)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-6, rtol=1e-4)
    assert update["loss/distill"] == pytest.approx(value, rel=1e-5)


def test_tokens_the_correction_masks_are_out_of_the_divergence():
    """``loss.token_mask``: two sampled tokens whose engine log-prob is 3 nats below the trainer's (ratio e^3,
    above the band's 2) get no divergence either, and keep their place in the per-row counts."""
    at = [(0, 2), (3, 4)]  # (row, next-token column) of two sampled tokens: rows 0 and 3, completion index 0
    def engine(old):
        shifted = old.clone()
        for r, c in at:
            shifted[r, c] -= 3.0
        return shifted
    policy, teacher, samples, got, update, _, batch = _divergence_update(
        "forward_kl", "grpo", extra=("loss.token_mask=true", "loss.decoupled=true"), engine=engine)
    assert all(batch.mask[r, c] == 1 for r, c in at)
    assert update["correction/tokens_masked"] == pytest.approx(2 / int(batch.mask.sum()))
    removed = {(r, c - (len(samples[r].prompt_ids) - 1)) for r, c in at}
    want, value = _divergence_reference(policy, teacher, samples, "forward_kl", 0.7, True, removed=removed)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-6, rtol=1e-4)
    assert update["loss/distill"] == pytest.approx(value, rel=1e-5)


def test_the_divergence_adds_nothing_where_a_distribution_gives_no_mass():
    """A ``-inf`` log-prob (a masked vocabulary slot): 0 times inf is no NaN, in the value or the gradient."""
    z = torch.tensor([[0.0, 1.0, float("-inf")]], requires_grad=True)
    t = torch.log(torch.tensor([[0.25, 0.5, 0.25]]))
    for kind in ("reverse_kl", "forward_kl"):
        div = token_divergence(kind, torch.log_softmax(z, -1), t)
        div.sum().backward()
        assert torch.isfinite(z.grad).all() if kind == "reverse_kl" else True
        z.grad = None
    assert math.isinf(float(token_divergence("forward_kl", torch.log_softmax(z, -1), t).detach()))
    assert float(token_divergence("reverse_kl", torch.log_softmax(z, -1), t).detach()) == pytest.approx(
        sum(p * math.log(p / q) for p, q in zip(torch.softmax(z, -1)[0, :2].tolist(), [0.25, 0.5])))


def test_whole_vocabulary_divergence_with_the_reward_mixed_in(tiny):
    """reward_coef > 0: the advantages are reward_coef x the group advantage on every sampled token."""
    cfg = tiny("distill.teacher=/t", "distill.divergence=forward_kl", "distill.reward_coef=0.5")
    policy = random_model(cfg.policy, vocab_size=259)
    batch = collate(_stitched_samples(torch.Generator().manual_seed(1)), torch.tensor([2.0, -2.0, 1.0, 0.0, 4.0]),
                    pad_id=0)
    old, _ = batch_logprobs(policy, batch, 1.0, 8)
    scored, _ = score_with_teacher(policy, batch, old, cfg)
    assert torch.equal(scored.advantages, 0.5 * batch.advantages.unsqueeze(1) * batch.mask)


@pytest.mark.parametrize("overrides, match", [
    (["distill.divergence=reverse_kl"], r"distill\.divergence is a setting of on-policy distillation"),
    (["distill.teacher=/t", "distill.divergence=reverse_kl", "optim.logits_chunk=4"],
     r"distill\.divergence=reverse_kl with optim\.logits_chunk=4"),
    (["distill.teacher=/t", "distill.divergence=js"], r"distill\.divergence"),
])
def test_divergence_refusals_name_the_key(tiny, overrides, match):
    with pytest.raises(ConfigError, match=match):
        tiny(*overrides)


def test_a_teacher_equal_to_the_student_gives_no_divergence(tmp_path, tiny):
    cfg = tiny()
    folder = _save(tmp_path / "same", _student_weights(cfg), byte_tokenizer())
    t, got = _run(tiny(f"distill.teacher={folder}", "distill.divergence=reverse_kl"), 2)
    for m in got:  # the same weights through differently grouped micro-batches: equal to float32 rounding
        assert abs(m["loss/distill"]) < 1e-6 and m["loss/grad_norm"] < 1e-3 and m["loss/pg"] == 0.0
    _, other = _run(tiny(*_peaked_pair(tiny, tmp_path), "distill.divergence=reverse_kl"), 1)
    assert other[0]["loss/grad_norm"] > 1.0  # against a teacher that differs


@pytest.mark.parametrize("kind", ["reverse_kl", "forward_kl"])
def test_the_whole_vocabulary_divergence_to_the_teacher_falls(tmp_path, tiny, kind):
    _, got = _run(tiny(*_peaked_pair(tiny, tmp_path), f"distill.divergence={kind}"), 10)
    div = [m["loss/distill"] for m in got]
    assert div[0] > 1.0, div
    assert sum(div[-3:]) / 3 < 0.5 * sum(div[:3]) / 3, div


def test_an_async_run_at_staleness_zero_takes_the_divergence_as_the_synchronous_one_bitwise(tmp_path, tiny):
    pair = (*_peaked_pair(tiny, tmp_path), "distill.divergence=forward_kl")
    sync, expected = _run(tiny(*pair), 2)
    asyn, got = _run(tiny(*pair, "rollout.mode=async", "rollout.max_staleness=0"), 2)
    for a, b in zip(expected, got):
        assert (a["loss/distill"], a["loss/grad_norm"]) == (b["loss/distill"], b["loss/grad_norm"])
    assert all(torch.equal(p, asyn.state.side.policy.state_dict()[k]) for k, p in sync.state.side.policy.state_dict().items())
