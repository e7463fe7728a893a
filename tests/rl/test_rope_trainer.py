"""``policy.rope_scaling`` in the RL trainer: the policy, the engine's copy and the reference all carry the
scaled window, a checkpoint's ``policy/config.json`` holds it (so ``from_pretrained`` loads the extended
model), and resuming a scaled run reproduces the next step bitwise."""
import json

import pytest
import torch

from trajkit.errors import ConfigError
from trajkit.models.rope import RopeScaling, rescaled
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.rl.build import random_model
from trajkit.rl.trainer import Trainer

YARN = ("policy.rope_scaling.type=yarn", "policy.rope_scaling.factor=4", "shaping.overlong_buffer=3",
        "loss.kl_coef=0.01")


def test_every_copy_of_the_policy_has_the_scaled_window(tiny, tmp_path):
    trainer = Trainer(tiny(*YARN), logger=False)
    state = trainer.state
    for model in (state.side.policy, state.side.reference, state.rollout.engine.model):
        assert model.config.max_position_embeddings == 4 * 1024  # random_model's 1024 positions x 4
        assert model.config.rope_parameters["rope_type"] == "yarn"
    trainer.step_once()
    path = trainer.save(str(tmp_path / "ckpt"))
    saved = json.loads((tmp_path / "ckpt" / "policy" / "config.json").read_text())
    assert saved["max_position_embeddings"] == 4096
    assert saved["rope_parameters"]["factor"] == 4.0
    assert saved["rope_parameters"]["original_max_position_embeddings"] == 1024
    resumed = Trainer(tiny(*YARN, f"checkpoint.resume_from={path}"), logger=False)
    assert resumed.state.side.policy.config.max_position_embeddings == 4096


def test_scaled_run_resumes_bitwise(tiny, tmp_path):
    straight = Trainer(tiny(*YARN), logger=False)
    for _ in range(2):
        expected = straight.step_once()
    first = Trainer(tiny(*YARN), logger=False)
    first.step_once()
    path = first.save(str(tmp_path / "ckpt"))
    got = Trainer(tiny(*YARN, f"checkpoint.resume_from={path}"), logger=False).step_once()
    assert got.metrics["loss/pg"] == expected.metrics["loss/pg"]
    assert [s.completion_ids for s in got.samples] == [s.completion_ids for s in expected.samples]


def test_a_given_model_must_come_scaled(tiny):
    cfg = tiny(*YARN)
    model = random_model(cfg.policy, vocab_size=259)
    with pytest.raises(ConfigError, match="pass it scaled"):
        Trainer(cfg, model=model, tokenizer=byte_tokenizer(), logger=False)
    scaled = rescaled(model, RopeScaling(type="yarn", factor=4.0))
    trainer = Trainer(cfg, model=scaled, tokenizer=byte_tokenizer(), logger=False)
    assert trainer.state.side.policy.config.max_position_embeddings == 4096
    assert torch.equal(trainer.state.side.policy.lm_head.weight, model.lm_head.weight)
