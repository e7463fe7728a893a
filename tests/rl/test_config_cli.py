"""Config errors name the bad key; ``trajkit train`` runs, logs and checkpoints; Sample validation."""
import json
import os

import pytest

from trajkit.cli.main import main
from trajkit.errors import ConfigError, InputError
from trajkit.rl.config import load_config
from trajkit.envs.sample import Sample, validate_sample

from .conftest import TINY


def test_unknown_keys_are_named(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("steps: 2\noptim:\n  lr: 1.0e-3\n  lrr: 2\nbogus: 1\n")
    with pytest.raises(ConfigError, match=r"'bogus'"):
        load_config(str(path))
    path.write_text("optim:\n  lr: 1.0e-3\n  lrr: 2\n")
    with pytest.raises(ConfigError, match=r"OptimConfig in optim: 'lrr' \(did you mean 'lr'\?\)"):
        load_config(str(path))
    with pytest.raises(ConfigError, match=r"'grop_size'"):
        load_config(None, ["rollout.grop_size=4"])


def test_values_are_checked_and_yaml_floats_coerced():
    assert load_config(None, ["optim.lr=3e-4"]).optim.lr == pytest.approx(3e-4)  # YAML reads 3e-4 as a string
    with pytest.raises(ConfigError, match="loss.name|LossConfig.name"):
        load_config(None, ["loss.name=ppo"])
    with pytest.raises(ConfigError, match="group_size must be >= 2"):
        load_config(None, ["rollout.group_size=1"])
    with pytest.raises(ConfigError, match="draft.distill needs"):
        load_config(None, ["draft.kind=ngram", "draft.distill=true"])
    with pytest.raises(ConfigError, match="key=value"):
        load_config(None, ["steps"])


def test_cli_reports_config_errors(capsys):
    assert main(["train", "no-such.yaml"]) == 2
    assert "no-such.yaml" in capsys.readouterr().err


def test_train_command_logs_and_checkpoints(tmp_path, capsys):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text("steps: 2\n")
    out = tmp_path / "run"
    args = ["train", str(cfg), *TINY, "log.report_to=[tensorboard]", f"log.out_dir={out}", "eval.every=1",
            "eval.num_prompts=4", "--no-progress"]
    assert main(args) == 0
    rows = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert [r["step"] for r in rows] == [0, 1, 2]
    for key in ("time/generation", "share/generation", "reward/raw", "reward/shaped", "mismatch/mean_abs",
                "loss/pg", "eval/reward"):
        assert key in rows[1], key
    assert sum(rows[1][f"share/{s}"] for s in ("data", "weight_sync", "generation", "logprob",
                                               "policy_update")) == pytest.approx(1.0)
    assert os.listdir(out / "tensorboard")
    dump = [json.loads(line) for line in open(out / "samples" / "step_000002.jsonl")]
    assert len(dump) == 2 and {"prompt", "completion", "raw_reward", "reward", "advantage"} <= set(dump[0])
    assert os.path.exists(out / "checkpoints" / "step_000002" / "trainer_state.pt")
    assert os.path.exists(out / "checkpoints" / "step_000002" / "policy" / "model.safetensors")
    assert "eval reward" in capsys.readouterr().out


def test_validate_sample_names_the_field():
    validate_sample(Sample([1], [2, 3], [-0.1, 0.0], [1, 0]))
    with pytest.raises(InputError, match="field logprobs"):
        validate_sample(Sample([1], [2, 3], [-0.1], [1, 1]))
    with pytest.raises(InputError, match="forced tokens"):
        validate_sample(Sample([1], [2, 3], [-0.1, -0.2], [1, 0]))
    with pytest.raises(InputError, match="field prompt_ids"):
        validate_sample(Sample([], [2], [-0.1], [1]))
