"""``optim.name=muon`` in the RL trainer: the optimiser is built from the config (Muon on the projections,
AdamW on the rest), a resumed run reproduces the next step bitwise, and settings of LoGRA and Muon given
together are refused with the reason."""
import pytest
import torch

from trajkit.errors import ConfigError
from trajkit.optim import MuonAdamW
from trajkit.rl.trainer import Trainer

# the overlong penalty gives a random policy's samples different rewards, hence non-zero advantages
MUON = ("optim.name=muon", "optim.lr=3e-3", "optim.muon.lr=2e-2", "optim.muon.adjust_lr=original",
        "optim.muon.momentum=0.9", "optim.muon.weight_decay=0.1", "shaping.overlong_buffer=3")


def test_trainer_builds_muon_from_the_config(tiny):
    state = Trainer(tiny(*MUON), logger=False).state
    opt = state.side.optimizer
    assert isinstance(opt, MuonAdamW)
    muon, adamw = opt.param_groups
    assert (muon["lr"], muon["momentum"], muon["weight_decay"], muon["adjust_lr_fn"]) == (2e-2, 0.9, 0.1, "original")
    assert muon["nesterov"] is True and muon["ns_steps"] == 5
    assert (adamw["lr"], adamw["betas"], adamw["weight_decay"]) == (3e-3, (0.9, 0.99), 0.0)
    names = {id(p): n for n, p in state.side.policy.named_parameters()}
    projections = sorted(n for n in names.values() if n.endswith("proj.weight"))
    assert sorted(names[id(p)] for p in muon["params"]) == projections
    default = Trainer(tiny("optim.name=muon", "optim.lr=1e-4"), logger=False).state.side.optimizer
    assert default.param_groups[0]["lr"] == 1e-4  # muon_lr=0: optim.lr
    assert default.param_groups[0]["adjust_lr_fn"] == "match_rms_adamw"


def test_muon_resume_reproduces_the_next_step(tiny, tmp_path):
    straight = Trainer(tiny(*MUON), logger=False)
    before = {n: p.detach().clone() for n, p in straight.state.side.policy.named_parameters()}
    for _ in range(3):
        expected = straight.step_once()
    assert all(not torch.equal(p, before[n]) for n, p in straight.state.side.policy.named_parameters())
    first = Trainer(tiny(*MUON), logger=False)
    for _ in range(2):
        first.step_once()
    path = first.save(str(tmp_path / "ckpt"))
    resumed = Trainer(tiny(*MUON, f"checkpoint.resume_from={path}"), logger=False)
    got = resumed.step_once()
    for key in ("loss/pg", "loss/grad_norm", "reward/raw"):
        assert got.metrics[key] == expected.metrics[key], key
    for (name, a), b in zip(straight.state.side.policy.state_dict().items(), resumed.state.side.policy.state_dict().values()):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("overrides,match", [
    (["optim.name=muon", "optim.logra.rank=8"], r"optim.logra is the section of optim.name=logra, but "
                                               r"optim.name=muon; set optim.name=logra or drop optim.logra$"),
    (["optim.name=muon", "optim.logra_rank=8"], r"optim.logra_rank \(now optim.logra.rank\) is a setting of "
                                               r"optim.name=logra, but optim.name=muon"),
    (["optim.name=muon", "optim.kl_budget=1e-3"], r"optim.kl_budget \(now optim.logra.kl_budget\) is a setting "
                                                 r"of optim.name=logra"),
    (["optim.name=logra", "optim.muon.momentum=0.9"], r"optim.muon is the section of optim.name=muon, "
                                                     r"but optim.name=logra"),
    (["optim.muon_lr=0.02"], r"optim.muon_lr \(now optim.muon.lr\) is a setting of optim.name=muon, but "
                             r"optim.name=adamw; set optim.name=muon or drop optim.muon_lr$"),
    (["optim.name=muon", "optim.muon.momentum=1"], r"optim.muon.momentum must be in \[0, 1\)"),
    (["optim.name=muon", "optim.muon_ns_steps=0"], r"optim.muon.ns_steps must be in \[1, 99\]"),
    (["optim.name=muon", "optim.muon.adjust_lr=spectral"], r"optim.muon.adjust_lr must be one of"),
])
def test_conflicting_or_bad_muon_settings_are_refused(tiny, overrides, match):
    with pytest.raises(ConfigError, match=match):
        tiny(*overrides)
