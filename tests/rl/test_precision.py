"""policy.device / policy.dtype (mixed precision), gradient checkpointing and micro-batching.

References: float32 without checkpointing is the reference for every gradient; bfloat16 log-probs are
compared with float32 ones on the real SmolLM2 (measured on this machine: mean |diff| 0.026 nats, max 0.14
over 37 completion tokens; bfloat16 keeps 8 significant bits, ~0.2% relative error per rounding, and a
30-layer model accumulates that into a few hundredths of a nat), with a stated 2x margin.
"""

import pytest
import torch

from trajkit.errors import ConfigError
from trajkit.rl.batching import batch_logprobs, collate
from trajkit.rl.build import build_models, enable_activation_checkpointing, random_model
from trajkit.rl.config import load_config
from trajkit.envs.rewards import RewardSet
from trajkit.envs.sample import Sample
from trajkit.rl.trainer import Trainer
from trajkit.rl.update import update_policy

from .conftest import TINY

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")



def alternating(completions, **kwargs):
    """0, 1, 0, 1, ...: every group of an even size holds both rewards."""
    return [float(i % 2) for i in range(len(completions))]

def _batch(seed=0, lengths=(6, 3, 5, 6, 2)):
    gen = torch.Generator().manual_seed(seed)
    samples = [Sample(torch.randint(0, 256, (1 + n % 3,), generator=gen).tolist(),
                      torch.randint(0, 256, (n,), generator=gen).tolist(), [0.0] * n, [1] * n) for n in lengths]
    adv = torch.linspace(-1.0, 1.0, len(samples))
    return collate(samples, adv, pad_id=256)


def _grads(policy, batch, cfg):
    old, _ = batch_logprobs(policy, batch, 1.0, 8)
    update_policy(policy, torch.optim.SGD(policy.parameters(), lr=0.0), batch, old, None, cfg)
    return torch.cat([p.grad.flatten() for p in policy.parameters()])


def _sharp(cfg):
    """A tiny random policy with a scaled-up head, so its distributions are far from uniform."""
    policy = random_model(cfg.policy, vocab_size=259).train()  # train mode, as build_models leaves it
    with torch.no_grad():
        policy.lm_head.weight.mul_(8.0)
    return policy


@no_cuda
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:3"])
def test_cuda_on_a_cpu_machine_is_a_config_error(device):
    with pytest.raises(ConfigError, match=f"policy.device={device}: this machine has no CUDA device"):
        load_config(None, [f"policy.device={device}"])


def test_bad_device_and_dtype_settings():
    with pytest.raises(ConfigError, match="policy.device must be auto, cpu, cuda or cuda:N, got 'gpu'"):
        load_config(None, ["policy.device=gpu"])
    with pytest.raises(ConfigError, match="policy.dtype"):
        load_config(None, ["policy.dtype=float8"])
    with pytest.raises(ConfigError, match="float16 needs a CUDA device"):
        load_config(None, ["policy.device=cpu", "policy.dtype=float16"])
    with pytest.raises(ConfigError, match="draft runs on policy.device"):
        load_config(None, ["draft.model.dtype=bfloat16"])
    cfg = load_config(None, ["policy.dtype=bfloat16", "policy.device=cpu"])
    assert (cfg.policy.device, cfg.policy.dtype) == ("cpu", "bfloat16")


def test_bf16_policy_trains_a_step_on_cpu(tiny):
    t = Trainer(tiny("policy.dtype=bfloat16", "policy.device=cpu", "loss.tis=true"), logger=False)
    t.state.rewards = RewardSet.build([alternating])  # every group mixed
    before = [p.detach().clone() for p in t.state.side.policy.parameters()]
    result = t.step_once()
    assert next(t.state.rollout.engine.model.parameters()).dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in t.state.side.policy.parameters())  # float32 master weights
    assert all(torch.isfinite(p).all() for p in t.state.side.policy.parameters())
    assert any(not torch.equal(a, p) for a, p in zip(before, t.state.side.policy.parameters()))
    assert result.metrics["loss/pg"] != 0.0
    # the engine samples from a bfloat16 copy, the trainer recomputes under bfloat16 autocast over float32
    # weights: the two differ (so bf16 is really used) but only by rounding (float32 gives ~1e-7)
    assert 1e-6 < result.metrics["mismatch/mean_abs"] < 0.01
    assert 0.99 < result.metrics["tis/weight_mean"] < 1.01
    t.state.rollout.sync(t.state.side.policy)  # weight_sync casts the new float32 weights into the bf16 copy
    for (name, p), q in zip(t.state.side.policy.named_parameters(), t.state.rollout.engine.model.parameters()):
        assert torch.equal(p.detach().to(torch.bfloat16), q), name


def test_bf16_gradient_is_close_to_the_float32_gradient():
    cfg32 = load_config(None, TINY + ["optim.grad_clip=1e9"])
    cfg16 = load_config(None, TINY + ["optim.grad_clip=1e9", "policy.dtype=bfloat16"])
    batch = _batch()
    g32 = _grads(_sharp(cfg32), batch, cfg32)
    g16 = _grads(_sharp(cfg16), batch, cfg16)
    cosine = float(torch.nn.functional.cosine_similarity(g32, g16, dim=0))
    assert 0.99 < cosine < 1.0 - 1e-9  # close, and not the float32 computation itself


@pytest.fixture(scope="module")
def smollm2(smollm2_folder):
    from trajkit.models.load import load_model, load_tokenizer

    return load_model(smollm2_folder), load_tokenizer(smollm2_folder)


def test_bf16_logprobs_of_the_real_model_are_close_to_float32(smollm2):
    model, tok = smollm2
    text = tok.apply_chat_template([{"role": "user", "content": "What is 12 times 7? Answer briefly."}],
                                   tokenize=False, add_generation_prompt=True)
    prompt = tok(text, add_special_tokens=False)["input_ids"]
    completion = tok("12 times 7 is 84. To see this, note that 10 times 7 is 70 and 2 times 7 is 14.",
                     add_special_tokens=False)["input_ids"]
    batch = collate([Sample(prompt, completion, [0.0] * len(completion), [1] * len(completion))], torch.zeros(1),
                    pad_id=tok.pad_token_id or 0)
    a32, _ = batch_logprobs(model, batch, 1.0, 8)
    a16, _ = batch_logprobs(model, batch, 1.0, 8, dtype=torch.bfloat16)
    diff = (a32 - a16)[batch.mask.bool()].abs()
    assert 1e-3 < float(diff.mean()) < 0.05  # measured 0.026
    assert float(diff.max()) < 0.3  # measured 0.14


def test_gradient_checkpointing_gives_the_same_gradients():
    cfg = load_config(None, TINY + ["optim.grad_clip=1e9", "optim.micro_batch_size=2", "policy.num_layers=2"])
    batch = _batch()
    reference = _sharp(cfg)
    checkpointed = _sharp(cfg)
    enable_activation_checkpointing(checkpointed)
    calls = []
    # a pre-hook inside the checkpointed layer (a post-hook may not fire: the recompute stops early once
    # it has every tensor the backward needs)
    checkpointed.model.layers[0].mlp.register_forward_pre_hook(lambda *_: calls.append(1))
    g_ref = _grads(reference, batch, cfg)
    calls.clear()
    old, _ = batch_logprobs(checkpointed, batch, 1.0, 8)
    assert len(calls) == 1  # no-grad logprob forward: one call, nothing to recompute
    calls.clear()
    update_policy(checkpointed, torch.optim.SGD(checkpointed.parameters(), lr=0.0), batch, old, None, cfg)
    # rows 0, 1, 3, 4 in 2 micro-batches, each layer run again in the backward; row 2 (advantage 0) has no
    # gradient: scored once without a graph (trajkit.rl.update.idle_rows)
    assert len(calls) == 2 * 2 + 1
    g_ckpt = torch.cat([p.grad.flatten() for p in checkpointed.parameters()])
    # equal to float32 rounding, not bit for bit: transformers 5.25's checkpointed layers run the recompute by
    # another path (measured: relative error 1.7e-7 of the gradient's norm; summing the same rows in micro-
    # batches of 1 instead of 2 already moves the reference by 6.6e-7); a recompute that lost or changed a
    # term (a mask, a dropout draw, a detached input) is off by orders of magnitude more
    assert float((g_ckpt - g_ref).norm() / g_ref.norm()) < 1e-6


def test_gradient_checkpointing_from_the_config():
    cfg = load_config(None, TINY + ["optim.gradient_checkpointing=true"])
    from trajkit.models.tokenizer import byte_tokenizer

    policy, _ = build_models(cfg, byte_tokenizer())
    assert policy.is_activation_checkpointing if hasattr(policy, "is_activation_checkpointing") \
        else policy.is_gradient_checkpointing


@pytest.mark.parametrize("minibatches, expected", [(1, [2, 2, 1]), (2, [2, 1, 2])])
def test_micro_batch_size_is_honoured_in_logprob_and_update(minibatches, expected, monkeypatch):
    """Rows per forward, counted on padded forwards (packing off: a packed forward is one sequence, and
    ``tests/rl/test_distill.py`` counts packed forwards per micro-batch)."""
    from trajkit.rl import packed

    monkeypatch.setattr(packed, "ENABLED", False)
    cfg = load_config(None, TINY + ["optim.micro_batch_size=2", f"optim.minibatches={minibatches}"])
    policy = random_model(cfg.policy, vocab_size=259)
    rows = []
    policy.register_forward_hook(lambda _m, _a, kwargs, _out: rows.append(kwargs["input_ids"].shape[0]),
                                 with_kwargs=True)
    batch = _batch()
    old, _ = batch_logprobs(policy, batch, 1.0, cfg.optim.micro_batch_size)
    assert rows == [2, 2, 1]
    rows.clear()
    update_policy(policy, torch.optim.SGD(policy.parameters(), lr=0.0), batch, old, None, cfg)
    assert rows == expected  # 2 minibatches: slices of 3 and 2 rows, each cut into micro-batches of 2


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_a_step_on_cuda(tiny, dtype):
    """Everything on the GPU: policy, reference, draft, engine copy (in ``dtype``), batch; one full step."""
    t = Trainer(tiny("policy.device=cuda", f"policy.dtype={dtype}", "loss.tis=true", "draft.kind=window",
                     "draft.distill=true", "loss.kl_coef=0.01"), logger=False)
    t.state.rewards = RewardSet.build([alternating])
    result = t.step_once()
    assert next(t.state.side.policy.parameters()).device.type == "cuda"
    assert next(t.state.rollout.engine.model.parameters()).dtype == getattr(torch, dtype)
    assert (t.state.side.grad_scaler is not None) == (dtype == "float16")
    assert torch.isfinite(torch.tensor(result.metrics["loss/pg"]))
    limit = 1e-4 if dtype == "float32" else 0.02
    assert result.metrics["mismatch/mean_abs"] < limit


def test_chunked_logits_give_the_dense_logprobs_and_gradients():
    """``optim.logits_chunk``: the same log-probs (logprob stage) and gradients (update) as the dense
    ``[B, L, V]`` path, with the output layer run on at most ``chunk`` positions at a time."""
    cfg = load_config(None, TINY + ["optim.grad_clip=1e9", "optim.micro_batch_size=2", "optim.logits_chunk=2"])
    batch = _batch()
    reference, chunked = _sharp(cfg), _sharp(cfg)
    widths = []
    chunked.lm_head.register_forward_hook(lambda _m, args, _out: widths.append(args[0].shape[1]))
    old_ref, _ = batch_logprobs(reference, batch, 0.7, 2)
    old_chunk, _ = batch_logprobs(chunked, batch, 0.7, 2, logits_chunk=2)
    read = batch.attention[:, 1:] > 0  # what a reader of log-probs reads: real next tokens from the first scored on
    read[:, :batch.first_scored()] = False
    assert torch.allclose(old_chunk[read], old_ref[read], atol=1e-5)
    assert max(widths) == 2 and len(widths) > 3  # 3 micro-batches (trimmed to their rows' width), 2 at a time
    g_ref = _grads(reference, batch, load_config(None, TINY + ["optim.grad_clip=1e9", "optim.micro_batch_size=2"]))
    old, _ = batch_logprobs(chunked, batch, 1.0, 8)
    widths.clear()
    update_policy(chunked, torch.optim.SGD(chunked.parameters(), lr=0.0), batch, old, None, cfg)
    g_chunk = torch.cat([p.grad.flatten() for p in chunked.parameters()])
    assert max(widths) == 2  # the update's forward (and its recompute in backward) is chunked too
    assert torch.allclose(g_chunk, g_ref, rtol=1e-4, atol=1e-7)


def test_logits_chunk_refuses_a_model_whose_logits_are_not_its_head():
    cfg = load_config(None, TINY + ["optim.logits_chunk=8"])
    from trajkit.models.logprobs import check_chunkable

    policy = random_model(cfg.policy, vocab_size=259)
    check_chunkable(policy)
    policy.config.final_logit_softcapping = 30.0
    with pytest.raises(ConfigError, match="final_logit_softcapping=30.0.*logits_chunk=0"):
        check_chunkable(policy)
