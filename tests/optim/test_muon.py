"""MuonAdamW against torch's own optimisers: the hidden matrices step exactly as ``torch.optim.Muon`` alone
on them, everything else exactly as ``torch.optim.AdamW`` alone; the split is checked against parameter
names, not against the split function; a state_dict round trip and an LR scheduler act on both halves."""
import copy
import io

import pytest
import torch

from tests.optim.helpers import VOCAB, summed_loss, tiny, tokens
from trajkit.optim import MuonAdamW, split_parameters

SETTINGS = {"lr": 3e-3, "weight_decay": 0.01, "betas": (0.9, 0.99), "muon_lr": 2e-2, "muon_weight_decay": 0.1,
            "momentum": 0.9, "nesterov": True, "adjust_lr": "original", "ns_steps": 5}


def _names(model, params) -> list[str]:
    ids = {id(p) for p in params}
    return [n for n, p in model.named_parameters() if id(p) in ids]


def _references(model, s=SETTINGS):
    """torch.optim.Muon on the projection weights, torch.optim.AdamW on the rest (chosen by name)."""
    hidden = [p for n, p in model.named_parameters() if n.endswith("proj.weight")]
    rest = [p for n, p in model.named_parameters() if not n.endswith("proj.weight")]
    muon = torch.optim.Muon(hidden, lr=s["muon_lr"], weight_decay=s["muon_weight_decay"], momentum=s["momentum"],
                            nesterov=s["nesterov"], adjust_lr_fn=s["adjust_lr"], ns_steps=s["ns_steps"])
    adamw = torch.optim.AdamW(rest, lr=s["lr"], betas=s["betas"], weight_decay=s["weight_decay"])
    return muon, adamw


def _train(model, optimizers, steps: int, seed: int = 0) -> None:
    for t in range(steps):
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        summed_loss(model, tokens(seed=seed + t)).backward()
        for opt in optimizers:
            opt.step()


def test_split_puts_projections_under_muon_and_vocabulary_norms_under_adamw():
    model = tiny()
    hidden, rest = split_parameters(model)
    assert _names(model, hidden) == [n for n, _ in model.named_parameters() if n.endswith("proj.weight")]
    assert len(hidden) == 7 * model.config.num_hidden_layers  # q, k, v, o, gate, up, down per layer
    names = _names(model, rest)
    assert "model.embed_tokens.weight" in names and "lm_head.weight" in names  # untied: both 2-D, both AdamW
    assert all(n.endswith(("norm.weight", "embed_tokens.weight", "lm_head.weight")) for n in names)
    assert all(model.get_parameter(n).shape[0] == VOCAB or model.get_parameter(n).ndim == 1 for n in names)


def test_tied_output_layer_is_one_adamw_parameter():
    model = tiny()
    model.lm_head.weight = model.model.embed_tokens.weight
    hidden, rest = split_parameters(model)
    assert sum(p is model.lm_head.weight for p in rest) == 1
    assert len(hidden) == 7 * model.config.num_hidden_layers


@pytest.mark.parametrize("nesterov,adjust", [(True, "original"), (False, "match_rms_adamw")])
def test_steps_equal_torch_muon_and_adamw_applied_alone(nesterov, adjust):
    s = {**SETTINGS, "nesterov": nesterov, "adjust_lr": adjust}
    ours, ref = tiny(), tiny()
    _train(ours, [MuonAdamW(ours, **s)], steps=3)
    _train(ref, list(_references(ref, s)), steps=3)
    moved = 0
    for (name, a), b in zip(ours.state_dict().items(), ref.state_dict().values()):
        assert torch.equal(a, b), name
        moved += not torch.equal(a, tiny().state_dict()[name])
    assert moved == len(ours.state_dict())  # every parameter moved: neither half was skipped


def test_state_dict_round_trip_continues_bitwise():
    """Two steps, save (torch.save, weights_only load), rebuild, load, two more = four straight steps."""
    straight = tiny()
    _train(straight, [MuonAdamW(straight, **SETTINGS)], steps=4)
    first = tiny()
    opt = MuonAdamW(first, **SETTINGS)
    _train(first, [opt], steps=2)
    buf = io.BytesIO()
    torch.save({"model": first.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    blob = torch.load(buf, weights_only=True)
    resumed = tiny(seed=1)
    resumed.load_state_dict(blob["model"])
    opt2 = MuonAdamW(resumed, **SETTINGS)
    opt2.load_state_dict(blob["opt"])
    assert opt2.muon.param_groups[0] is opt2.param_groups[0] and opt2.muon.state is opt2.state
    assert all("momentum_buffer" in opt2.state[p] for p in opt2.muon.param_groups[0]["params"])
    _train(resumed, [opt2], steps=2, seed=2)
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name


def test_lr_scheduler_reaches_both_halves():
    ours, ref = tiny(), tiny()
    opt = MuonAdamW(ours, **SETTINGS)
    torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.5)
    assert opt.muon.param_groups[0]["lr"] == SETTINGS["muon_lr"] / 2
    assert opt.adamw.param_groups[0]["lr"] == SETTINGS["lr"] / 2
    _train(ours, [opt], steps=2)
    half = {**SETTINGS, "lr": SETTINGS["lr"] / 2, "muon_lr": SETTINGS["muon_lr"] / 2}
    _train(ref, list(_references(ref, half)), steps=2)
    for a, b in zip(ours.parameters(), ref.parameters()):
        assert torch.equal(a, b)


def test_parameters_without_a_gradient_stay_put():
    """Parameters without a gradient are skipped by both halves (a frozen copy's weights stay put)."""
    model = tiny()
    frozen = copy.deepcopy(model)
    opt = MuonAdamW(model, **SETTINGS)
    model.lm_head.weight.requires_grad_(False)
    _train(model, [opt], steps=1)
    assert torch.equal(model.lm_head.weight, frozen.lm_head.weight)
    assert not torch.equal(model.model.layers[0].mlp.up_proj.weight, frozen.model.layers[0].mlp.up_proj.weight)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="adjust_lr must be one of"):
        MuonAdamW(tiny(), adjust_lr="spectral")
    with pytest.raises(ValueError, match=r"momentum must be in \[0, 1\)"):
        MuonAdamW(tiny(), momentum=1.0)
