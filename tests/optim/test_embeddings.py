"""LoGRA's vocabulary matrices (embeddings="rows"): the exact gradient, accumulated in place, against
autograd's dense gradient, and RowAdam's step on it written out by hand; tied and untied, with a padding
token; no second vocabulary-sized tensor during backward."""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import GemmaConfig, GemmaForCausalLM, LlamaForCausalLM

from tests.optim.helpers import VOCAB, dense_grads, summed_loss, tiny, tokens
from trajkit.models.spec import TinySpec
from trajkit.optim import LoGRA

PAD = 3


def tied(seed: int = 0):
    """The helpers' tiny Llama with one tied vocabulary matrix and a padding token (its lookup row gets no
    gradient from the embedding, only from the output layer)."""
    config = TinySpec(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_heads=4, num_kv_heads=2).config()
    config.tie_word_embeddings, config.pad_token_id = True, PAD
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).train()
    assert model.lm_head.weight is model.model.embed_tokens.weight
    return model


def _ids():
    ids = tokens(rows=3, width=11)
    ids[:, -2:] = PAD
    return ids


CUDA = pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                     reason="needs a CUDA device")])


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("build", [tiny, tied], ids=["untied", "tied"])
def test_vocabulary_gradient_and_step_match_the_dense_reference(build, device):
    """The whole step against a dense recomputation: vocabulary weights ``W(1 - lr wd) - lr G / row RMS``
    from autograd's gradient G; sketched targets ``W(1 - lr wd) - lr (S / row RMS) A`` with ``S = G Aᵀ``
    and this step's A (drawn on ``device``)."""
    ids = _ids()
    grads = dense_grads(build(), ids)
    model = build().to(device)
    before = {n: p.detach().cpu().clone() for n, p in model.named_parameters()}
    opt = LoGRA(model, lr=1e-2, rank=8, weight_decay=0.1)
    assert len(opt.rows) == (1 if build is tied else 2)
    names = {id(p): n for n, p in model.named_parameters()}
    for half in (ids[:1], ids[1:]):  # two micro-batches accumulate into one .grad
        summed_loss(model, half.to(device)).backward()
    for w in opt.rows:
        assert w.requires_grad  # so a path that reads the weight directly still reaches it (next test)
        torch.testing.assert_close(w.grad.cpu(), grads[names[id(w)]], rtol=1e-4, atol=1e-6)
    if build is tied:
        assert float(grads["model.embed_tokens.weight"][PAD].abs().sum()) > 0  # the output layer's part
    a = {s.name: s.projection().cpu() for s in opt.sketches.states}
    opt.step()

    def expected(name, update):
        rms = update.square().mean(1, keepdim=True).sqrt()  # v = (1 - beta2) ms, bias-corrected: ms itself
        return before[name] * (1 - 1e-2 * 0.1) - 1e-2 * update / (rms + 1e-8)
    for w in opt.rows:
        name = names[id(w)]
        torch.testing.assert_close(w.cpu(), expected(name, grads[name]), rtol=1e-4, atol=1e-6)
        assert w.grad is None  # the buffer held D after the step; the next backward starts afresh
    for s in opt.sketches.states:
        name = s.name + ".weight"
        sketch = grads[name] @ a[s.name].T
        rms = sketch.square().mean(1, keepdim=True).sqrt()
        want = before[name] * (1 - 1e-2 * 0.1) - 1e-2 * (sketch / (rms + 1e-8)) @ a[s.name]
        torch.testing.assert_close(s.weight.cpu(), want, rtol=1e-4, atol=1e-5)
    assert [e["row_v"].shape for e in opt.row_state] == [(VOCAB, 1)] * len(opt.rows)


def _direct_loss(model, ids):
    """Next-token cross-entropy with the logits from ``lm_head.weight`` directly (as TRL's fused LM head
    does), bypassing the output module; the lookup still goes through the embedding module."""
    hidden = model.model(input_ids=ids).last_hidden_state[:, :-1]
    logits = torch.nn.functional.linear(hidden, model.lm_head.weight).float()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1), reduction="sum")


@pytest.mark.parametrize("build", [tiny, tied], ids=["untied", "tied"])
def test_a_loss_reading_the_output_weight_directly_still_gets_its_whole_gradient(build):
    """Autograd's gradient for the directly-read weight lands in the same ``.grad`` as the hooked lookup's."""
    ids = _ids()
    ref = build()
    _direct_loss(ref, ids).backward()
    model = build()
    opt = LoGRA(model, rank=8)
    _direct_loss(model, ids).backward()
    for w, r in zip(opt.rows, (ref.model.embed_tokens.weight, ref.lm_head.weight)):
        torch.testing.assert_close(w.grad, r.grad, rtol=1e-4, atol=1e-6)


def test_an_embedding_subclass_with_its_own_forward_keeps_it():
    """Gemma's embedding multiplies the lookup by sqrt(hidden) in its own forward: it is not replaced (the
    logits are unchanged, with and without grad), and the tied weight's gradient is autograd's lookup part
    plus the hooked output layer's part, as dense."""
    config = GemmaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, pad_token_id=PAD)

    def gemma():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return GemmaForCausalLM(config).train()
    ids = _ids()
    ref = gemma()
    with torch.no_grad():
        plain = ref(input_ids=ids).logits
    summed_loss(ref, ids).backward()
    model = gemma()
    opt = LoGRA(model, rank=8)
    assert "forward" not in model.model.embed_tokens.__dict__ and "forward" in model.lm_head.__dict__
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=ids).logits, plain)
    summed_loss(model, ids).backward()
    [w] = opt.rows
    torch.testing.assert_close(w.grad, ref.lm_head.weight.grad, rtol=1e-4, atol=1e-6)


class _NewTensors(TorchDispatchMode):
    """Shapes of the tensors every op creates (outputs that alias an input, as in-place ops, excluded)."""

    def __init__(self):
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                self.shapes.append(tuple(t.shape))
        return out


@pytest.mark.parametrize("embeddings", ["rows", "adamw"])
def test_backward_forms_no_vocabulary_sized_tensor_beyond_the_gradient(embeddings):
    """Second micro-batch of a tied model (the .grad buffer exists): with in-place accumulation no [V, hidden]
    tensor is created; autograd's own path creates at least the output layer's Hᵀ X and the lookup's dense
    scatter."""
    model = tied()
    LoGRA(model, rank=8, embeddings=embeddings)
    summed_loss(model, _ids()).backward()
    loss = summed_loss(model, _ids())  # 33 tokens: no activation has the [40, 32] shape
    with _NewTensors() as rec:
        loss.backward()
    assert len(rec.shapes) > 50
    created = rec.shapes.count((VOCAB, 32))
    assert created == 0 if embeddings == "rows" else created >= 2, created


def test_mixed_precision_backward_is_as_accurate_as_autograd_under_autocast():
    """bfloat16 autocast: the sketch and vocabulary backwards take low-precision output gradients. Against
    the float32 gradient, the in-place vocabulary gradient errs no more than autograd's under autocast
    (it multiplies in float32 where autograd multiplies in bfloat16)."""
    ids = _ids()
    exact = dense_grads(tied(), ids)["model.embed_tokens.weight"]  # tied: named once
    ref = tied()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = summed_loss(ref, ids)
    loss.backward()
    model = tied()
    opt = LoGRA(model, rank=8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = summed_loss(model, ids)
    loss.backward()
    ours, theirs = (float((g - exact).abs().max()) for g in (opt.rows[0].grad, ref.lm_head.weight.grad))
    assert 0 < ours <= 1.5 * theirs, (ours, theirs)
    norm = ref.model.layers[0].input_layernorm.weight
    torch.testing.assert_close(model.model.layers[0].input_layernorm.weight.grad, norm.grad, rtol=2e-2, atol=2e-3)
    opt.step()


def test_remove_restores_plain_modules():
    model = tied()
    opt = LoGRA(model, rank=8)
    opt.remove()
    assert all(p.requires_grad for p in model.parameters())
    summed_loss(model, _ids()).backward()
    assert all(p.grad is not None for p in model.parameters())
    assert not any("forward" in m.__dict__ for m in model.modules())
