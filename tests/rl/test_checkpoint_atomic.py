"""A checkpoint interrupted while it is written leaves the previous one loadable."""
from types import SimpleNamespace

import pytest
import torch

from trajkit.rl import checkpoint


class _Dict:
    def __init__(self, value):
        self.value = value

    def state_dict(self):
        return {"v": self.value}


def _state(step):
    return SimpleNamespace(step=step, stream=_Dict(step), policy=_Dict(torch.tensor([float(step)])),
                           optimizer=_Dict(step), alarm=_Dict(step), draft=None, draft_optimizer=None)


def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    checkpoint.save_checkpoint(_state(1), str(tmp_path))
    before = (tmp_path / "state.pt").read_bytes()
    real_save = torch.save

    def half_then_interrupt(obj, f):
        real_save({"partial": True}, f)
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", half_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save_checkpoint(_state(2), str(tmp_path))
    assert (tmp_path / "state.pt").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["state.pt"]
    assert torch.load(tmp_path / "state.pt", weights_only=False)["step"] == 1
