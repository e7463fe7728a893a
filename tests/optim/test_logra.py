"""The LoGRA optimiser against references: RowAdam by hand, a dense recomputation of the step, dense SGD
at full orthogonal rank, torch AdamW for the other parameters, checkpoints and accumulation."""
from __future__ import annotations

import copy

import pytest
import torch

from tests.optim.helpers import dense_grads, summed_loss, tiny, tokens
from trajkit.optim import LoGRA, row_adam_direction, sgd_direction


def test_row_adam_direction_by_hand():
    """Two steps, beta2 0.9. Row 0: mean square 12.5 -> v 1.25, bias-corrected 12.5, RMS 3.5355, so
    D = [3, 4] / 3.5355; then [1, 1]: v = 0.9 * 1.25 + 0.1 * 1 = 1.225, / (1 - 0.81) = 6.4474, RMS 2.5392."""
    v = torch.zeros(2, 1)
    d1 = row_adam_direction(torch.tensor([[3.0, 4.0], [0.0, 2.0]]), v, 1, 0.9, 1e-8)
    torch.testing.assert_close(d1, torch.tensor([[0.848528, 1.131371], [0.0, 1.414214]]), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(v, torch.tensor([[1.25], [0.2]]))
    d2 = row_adam_direction(torch.tensor([[1.0, 1.0], [0.0, 0.0]]), v, 2, 0.9, 1e-8)
    torch.testing.assert_close(d2, torch.tensor([[0.393830, 0.393830], [0.0, 0.0]]), rtol=1e-5, atol=1e-6)
    s = torch.tensor([[1.0, -2.0]])
    assert torch.equal(sgd_direction(s, torch.zeros(1, 1), 1, 0.9, 1e-8), s)
    with pytest.raises(ValueError, match="step must be >= 1"):
        row_adam_direction(s, torch.zeros(1, 1), 0, 0.9, 1e-8)


def _optimisers(lr=1e-2, **kw):
    model = tiny()
    return model, LoGRA(model, lr=lr, rank=8, **kw)


def test_one_step_equals_the_dense_recomputation_and_adamw_on_the_rest():
    """Targets: W - lr D A with S = G Aᵀ from the *dense* gradient of an unsketched copy and D = S / row RMS
    written out here; with embeddings="adamw", embeddings and norms: torch.optim.AdamW on the copy."""
    ids = tokens()
    ref = tiny()
    grads = dense_grads(ref, ids)
    adamw = torch.optim.AdamW([p for n, p in ref.named_parameters() if not n.endswith("proj.weight")],
                              lr=1e-2, betas=(0.9, 0.99), weight_decay=0.0)
    adamw.step()
    model, opt = _optimisers(embeddings="adamw")
    summed_loss(model, ids).backward()
    a = {s.name: s.projection() for s in opt.sketches.states}
    opt.step()
    ref_params = dict(ref.named_parameters())
    for s in opt.sketches.states:
        sk = grads[s.name + ".weight"] @ a[s.name].T
        rms = (sk.square().mean(1, keepdim=True) * 0.01 / (1 - 0.99)).sqrt()  # v = (1 - beta2) ms, corrected
        expected = ref_params[s.name + ".weight"] - 1e-2 * (sk / (rms + 1e-8)) @ a[s.name]
        torch.testing.assert_close(s.weight, expected, rtol=1e-4, atol=1e-6)
    for name, p in model.named_parameters():
        if not name.endswith("proj.weight"):
            torch.testing.assert_close(p, ref_params[name], rtol=1e-5, atol=1e-7)


def test_full_rank_orthogonal_sketch_sgd_step_equals_dense_sgd():
    """AᵀA = I exactly, so -lr S A = -lr G AᵀA = -lr G. q/k/v/o/gate/up all read the 32-wide hidden state
    (rank 32 = full); everything else frozen on both sides so only the targets move."""
    ids = tokens()
    ref, model = tiny(), tiny()
    pattern = r"(q|k|v|o|gate|up)_proj$"
    for m in (ref, model):
        for name, p in m.named_parameters():
            p.requires_grad_(bool(__import__("re").search(pattern, name.removesuffix(".weight"))))
    sgd = torch.optim.SGD([p for p in ref.parameters() if p.requires_grad], lr=0.05)
    summed_loss(ref, ids).backward()
    sgd.step()
    opt = LoGRA(model, lr=0.05, rank=32, distribution="orthogonal", update="sgd", targets=pattern)
    assert opt.native is None and len(opt.sketches.states) == 12
    summed_loss(model, ids).backward()
    opt.step()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)


def test_micro_batches_accumulate_to_the_full_batch_step():
    ids = tokens(rows=6)
    full, opt_full = _optimisers()
    parts, opt_parts = _optimisers()
    summed_loss(full, ids).backward()
    opt_full.step()
    for rows in (slice(0, 2), slice(2, 6)):
        summed_loss(parts, ids[rows]).backward()
    opt_parts.step()
    for p, q in zip(full.parameters(), parts.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6)


def test_state_is_one_float_per_output_row_and_targets_never_get_grad():
    model, opt = _optimisers()
    for _ in range(2):
        opt.zero_grad()
        summed_loss(model, tokens()).backward()
        opt.step()
    for s, extra in zip(opt.sketches.states, opt.sketch_state):
        assert set(extra) == {"row_v"} and extra["row_v"].shape == (s.weight.shape[0], 1)
        assert s.weight.grad is None and s.weight not in opt.state
    target_state = sum(e["row_v"].numel() for e in opt.sketch_state)
    assert target_state == sum(s.weight.shape[0] for s in opt.sketches.states)  # O(out), not O(out * in)
    assert opt.param_groups[0]["step"] == 2 and opt.sketches.step == 2


def test_zero_grad_clears_sketches_and_steps_draw_new_projections():
    model, opt = _optimisers()
    summed_loss(model, tokens()).backward()
    state = opt.sketches.states[0]
    a0 = state.projection()
    opt.zero_grad()
    assert float(state.sketch.abs().sum()) == 0.0
    summed_loss(model, tokens()).backward()
    opt.step()
    assert not torch.equal(a0, state.projection())


def test_checkpoint_round_trip_reproduces_the_next_step_exactly():
    model, opt = _optimisers()
    for i in range(2):
        opt.zero_grad()
        summed_loss(model, tokens(seed=i)).backward()
        opt.step()
    blob = copy.deepcopy({"model": model.state_dict(), "opt": opt.state_dict()})
    resumed, opt2 = _optimisers()
    resumed.load_state_dict(blob["model"])
    opt2.load_state_dict(blob["opt"])
    for m, o in ((model, opt), (resumed, opt2)):
        o.zero_grad()
        summed_loss(m, tokens(seed=9)).backward()
        o.step()
    for p, q in zip(model.parameters(), resumed.parameters()):
        assert torch.equal(p, q)
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt2, lambda step: 0.5)
    assert [g["lr"] for g in opt2.param_groups] == [5e-3, 5e-3] and opt2.native.param_groups[0]["lr"] == 5e-3
    del scheduler


def test_low_precision_weights_update_through_a_float32_master():
    """A bf16 weight near 1 cannot move by 1e-5 (its spacing is 2^-7), the float32 master can; the weight is
    the master rounded."""
    model = tiny(dtype=torch.bfloat16)
    opt = LoGRA(model, lr=1e-5, rank=8)
    before = [w.detach().float().clone() for w in [s.weight for s in opt.sketches.states] + opt.rows]
    for i in range(3):
        opt.zero_grad()
        summed_loss(model, tokens(seed=i)).backward()
        opt.step()
    weights = [s.weight for s in opt.sketches.states] + opt.rows
    assert len(opt.rows) == 2  # untied embedding and output layer
    for w, extra, w0 in zip(weights, opt.sketch_state + opt.row_state, before):
        assert extra["master"].dtype == torch.float32
        assert torch.equal(w, extra["master"].to(torch.bfloat16))
        moved = (extra["master"] - w0).abs().max()
        assert 1e-6 < float(moved) < 1e-3


def test_bad_settings_raise_one_clear_error():
    with pytest.raises(ValueError, match="kl_budget must be > 0"):
        _optimisers(kl_budget=0.0)
    with pytest.raises(ValueError, match="distribution must be one of"):
        _optimisers(distribution="uniform")
    model, opt = _optimisers(kl_budget=1e-3)
    summed_loss(model, tokens()).backward()
    with pytest.raises(ValueError, match=r"needs step\(kl_forward=...\)"):
        opt.step()
    with pytest.raises(ValueError, match="embeddings must be 'rows'"):
        _optimisers(embeddings="sgd")
    with pytest.raises(ValueError, match="same embeddings= setting"):
        _optimisers(embeddings="adamw")[1].load_state_dict(_optimisers()[1].state_dict())
    other = LoGRA(tiny(), rank=8, targets="q_proj$")
    with pytest.raises(ValueError, match="checkpoint targets .* do not match"):
        other.load_state_dict(_optimisers()[1].state_dict())
