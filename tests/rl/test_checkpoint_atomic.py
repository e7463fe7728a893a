"""A checkpoint directory appears complete or not at all: an interrupted save leaves the previous one as it
was (and loadable), a finished save over it replaces it, and no temporary folders stay behind."""
import pytest
import torch

from trajkit.rl.trainer import Trainer


def _files(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_interrupted_save_keeps_the_previous_checkpoint(tiny, tmp_path, monkeypatch):
    trainer = Trainer(tiny("draft.kind=model"), logger=False)
    trainer.step_once()
    target = tmp_path / "ckpt"
    trainer.save(str(target))
    before = _files(target)
    trainer.step_once()
    real_save = torch.save

    def half_then_interrupt(obj, f):  # the trainer state is written last, after both models
        real_save({"partial": True}, f)
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", half_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        trainer.save(str(target))
    assert _files(target) == before
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]
    monkeypatch.undo()
    resumed = Trainer(tiny("draft.kind=model", f"checkpoint.resume_from={target}"), logger=False)
    assert resumed.step == 1


def test_a_finished_save_replaces_the_folder(tiny, tmp_path):
    trainer = Trainer(tiny(), logger=False)
    trainer.step_once()
    target = tmp_path / "ckpt"
    trainer.save(str(target))
    trainer.step_once()
    trainer.save(str(target))
    assert torch.load(target / "trainer_state.pt", weights_only=True)["step"] == 2
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]
