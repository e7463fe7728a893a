"""The rows of a micro-batch packed into one sequence (:mod:`trajkit.rl.packed`) against references: each row
forwarded alone (values), the padded forward (gradients, and the distributions a divergence reads), the cost
model's choice against hand-counted work, and each condition under which it must not apply."""
import pytest
import torch

from trajkit.envs.sample import Sample
from trajkit.models.spec import TinySpec, build_model
from trajkit.rl import packed, shared_prefix
from trajkit.rl.batching import collate, token_logprobs, token_logprobs_and_dists

VOCAB = 259
KEYWORDS = ("past_key_values", True)


def _model(family="llama", attn="sdpa", layers=2):
    spec = TinySpec(vocab_size=VOCAB, hidden_size=32, num_layers=layers, num_heads=4, num_kv_heads=2,
                    intermediate_size=64, family=family)
    model = build_model(spec, seed=3, init_scale=5.0)
    model.config._attn_implementation = attn
    return model


def _samples(prefix: int, shape=((2, 30), (3, 2), (1, 17), (2, 5), (4, 1), (1, 9))) -> list[Sample]:
    """Rows sharing their first ``prefix`` tokens, then a prompt of their own and a reply of very unequal
    lengths (1 to 30 tokens: most of a padded forward is padding); row 3 has a forced token (mask 0)."""
    g = torch.Generator().manual_seed(7)
    system = torch.randint(3, VOCAB, (prefix,), generator=g).tolist()
    out = []
    for i, (own, reply) in enumerate(shape):
        ids = torch.randint(3, VOCAB, (own + reply,), generator=g).tolist()
        mask = [0 if (i == 3 and j == 2) else 1 for j in range(reply)]
        out.append(Sample(system + ids[:own], ids[own:], [-1.0] * reply, mask))
    return out


def _batch(samples):
    return collate(samples, torch.linspace(-1.0, 1.0, len(samples)), pad_id=0)


def _alone(model, s: Sample, temperature: float) -> torch.Tensor:
    """Reference: the row forwarded alone, unpadded, full logits -> its reply tokens' log-probs."""
    ids = torch.tensor([s.ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, :-1].float()
    logp = torch.log_softmax(logits / temperature, dim=-1).gather(-1, ids[0, 1:, None])[:, 0]
    return logp[len(s.prompt_ids) - 1:]


def _grads(model, batch, enabled: bool, monkeypatch):
    monkeypatch.setattr(packed, "ENABLED", enabled)
    model.zero_grad(set_to_none=True)
    logp = token_logprobs(model, batch, 0.7)
    w = torch.linspace(-1.0, 1.0, logp.numel()).reshape(logp.shape)
    (logp * batch.mask * w).sum().backward()
    return logp.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("family, attn, prefix", [("llama", "sdpa", 10), ("llama", "sdpa", 0),
                                                  ("llama", "eager", 10), ("qwen2", "sdpa", 10)])
def test_packed_rows_equal_each_row_alone_and_the_padded_gradient(monkeypatch, family, attn, prefix):
    model = _model(family, attn)
    samples = _samples(prefix)
    batch = _batch(samples)
    start = batch.first_scored()
    p = packed.plan(model, batch.input_ids, batch.attention, batch.lengths, start, KEYWORDS)
    assert p == packed.Plan(prefix, [len(s.ids) for s in samples])  # a shared prefix under 8 tokens is none
    calls = []
    model.register_forward_hook(lambda _m, _a, kw, _o: calls.append(
        (tuple(kw["input_ids"].shape), tuple(kw["attention_mask"].shape) if kw.get("attention_mask") is not None
         else None)), with_kwargs=True)
    got, got_grads = _grads(model, batch, True, monkeypatch)
    tokens = sum(len(s.ids) for s in samples) - len(samples) * prefix
    assert calls == ([((1, prefix), None)] if prefix else []) + [((1, tokens), (1, 1, tokens, prefix + tokens))]
    for i, s in enumerate(samples):
        p0, c = len(s.prompt_ids), len(s.completion_ids)
        torch.testing.assert_close(got[i, p0 - 1:p0 - 1 + c], _alone(model, s, 0.7), rtol=0, atol=3e-6)
        assert not got[i, :start].any() and not got[i, len(s.ids) - 1:].any()  # 0 before the output layer, past the row
    padded, padded_grads = _grads(model, batch, False, monkeypatch)
    mask = batch.mask > 0
    torch.testing.assert_close(got[mask], padded[mask], rtol=0, atol=3e-6)
    for name, g in padded_grads.items():
        assert float(g.abs().max()) > 0 or name.endswith("bias"), name
        torch.testing.assert_close(got_grads[name], g, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("prefix", [10, 0])
def test_a_row_that_ends_before_the_first_scored_column(monkeypatch, prefix):
    """A failed episode is an empty sample: its prompt alone, here shorter than every other row's prompt, so
    it ends before the first scored column. It packs with the rest, has nothing scored (all 0), and the other
    rows keep their own values."""
    model = _model()
    samples = _samples(prefix, shape=((4, 30), (3, 2), (4, 17), (4, 5)))
    empty = Sample(samples[1].prompt_ids[:-1], [], [], [])
    samples = [samples[0], empty, *samples[2:]]
    batch = _batch(samples)
    start = batch.first_scored()
    assert len(empty.ids) - 1 < start
    assert packed.plan(model, batch.input_ids, batch.attention, batch.lengths, start, KEYWORDS) is not None
    with torch.no_grad():
        got = token_logprobs(model, batch, 0.7)
    assert not got[1].any()
    for i, s in enumerate(samples):
        if s.completion_ids:
            p0, c = len(s.prompt_ids), len(s.completion_ids)
            torch.testing.assert_close(got[i, p0 - 1:p0 - 1 + c], _alone(model, s, 0.7), rtol=0, atol=3e-6)


def test_packed_distributions_are_the_padded_ones_at_the_sampled_positions(monkeypatch):
    """What a whole-vocabulary divergence reads: the log-distributions at the N positions where the mask is
    1, row-major, from the packed forward as from the padded one (gradients too)."""
    model = _model()
    batch = _batch(_samples(10))

    def run(enabled):
        monkeypatch.setattr(packed, "ENABLED", enabled)
        model.zero_grad(set_to_none=True)
        lp, dists = token_logprobs_and_dists(model, batch, 0.7)
        w = torch.linspace(-1.0, 1.0, dists.numel()).reshape(dists.shape)
        (dists * w).sum().backward()
        return lp.detach(), dists.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    lp, dists, grads = run(True)
    lp0, dists0, grads0 = run(False)
    assert dists.shape == (int(batch.mask.sum()), VOCAB)
    torch.testing.assert_close(dists, dists0, rtol=0, atol=3e-6)
    mask = batch.mask > 0
    torch.testing.assert_close(lp[mask], lp0[mask], rtol=0, atol=3e-6)
    for name, g in grads0.items():  # sums over the whole vocabulary: float32 rounding at the gradient's own scale
        torch.testing.assert_close(grads[name], g, rtol=1e-4, atol=2e-6 * float(g.abs().max()), msg=name)


def test_the_cost_model_against_hand_counted_work():
    """One layer, d=32, 4 heads of 8 with 2 key/value heads, ffn 64, 259 ids, untied: N = q,o 2*32*32 + k,v
    2*32*16 + gate,up,down 3*32*64 + norms 3*32 + output layer 259*32 = 17600 parameters outside the input
    embedding; a (query, key) pair costs 4*32*1. Two rows, no shared prefix: 40 and 4 tokens pack (44 tokens:
    2N*44 + 128*44*44 = 1,796,608 against padded 2N*80 + 128*80*40 = 3,225,600); 20 and 20 do not (nothing to
    save); 20 and 19 do not either (1,567,488 against 1,510,400: the cross-row attention costs more than one
    padded token)."""
    model = _model(layers=1)
    assert packed.matmul_params(model) == 17600

    def choice(a, b):
        samples = [Sample([5, 6], list(range(7, 7 + a - 2)), [0.0] * (a - 2), [1] * (a - 2)),
                   Sample([8, 9], list(range(7, 7 + b - 2)), [0.0] * (b - 2), [1] * (b - 2))]
        batch = _batch(samples)
        return packed.plan(model, batch.input_ids, batch.attention, batch.lengths, batch.first_scored(), KEYWORDS)

    assert choice(40, 4) == packed.Plan(0, [40, 4])
    assert choice(20, 20) is None
    assert choice(20, 19) is None


def test_where_packing_must_not_apply(monkeypatch):
    model = _model()
    batch = _batch(_samples(10))
    start = batch.first_scored()

    def plan(m=model, attention=batch.attention, keywords=KEYWORDS, rows=None):
        ids, lengths = batch.input_ids, batch.lengths
        if rows is not None:
            ids, attention, lengths = ids[rows], attention[rows], lengths[rows]
        return packed.plan(m, ids, attention, lengths, start, keywords)

    assert plan() is not None
    assert plan(keywords=("past_key_values", False)) is None  # no logits_to_keep
    assert plan(rows=torch.tensor([0])) is None  # one row: nothing to pack
    holed = batch.attention.clone()
    holed[0, 12] = 0  # a row that is not its tokens then padding
    assert plan(attention=holed) is None
    monkeypatch.setattr(packed, "MAX_MASK_ELEMENTS", 100)  # the mask would not fit
    assert plan() is None
    monkeypatch.undo()
    for attr, value in (("_attn_implementation", "flash_attention_2"), ("model_type", "gemma2"),
                        ("layer_types", ["full_attention", "sliding_attention"])):
        m = _model()
        setattr(m.config, attr, value)
        assert plan(m) is None, attr
    m = _model(family="qwen2")
    m.config.use_sliding_window, m.config.sliding_window = True, 16
    assert plan(m) is None
    m = _model()
    m.gradient_checkpointing_enable()
    assert plan(m) is None
    monkeypatch.setattr(packed, "ENABLED", False)
    assert plan() is None
