"""Config mistakes are one line and exit 2, never a traceback; meaningless values are refused."""
import pytest

from trajkit.cli.main import build_parser, main, parse
from trajkit.errors import ConfigError
from trajkit.rl.config import OptimConfig, load_config


@pytest.mark.parametrize("overrides,message", [
    (["policy=5"], "policy is a section"),
    (["optim.lr=nan"], "optim.lr must be a finite number, got nan"),
    (["optim.lr=.inf"], "optim.lr must be a finite number, got inf"),
    (["optim.weight_decay=-5"], "optim.weight_decay must be >= 0, got -5.0"),
    (["optim.beta1=2"], r"optim.beta1 must be in \[0, 1\), got 2.0"),
    (["task.rep.min_len=10", "task.rep.max_len=2"], r"task.rep.min_len \(10\) must be <= task.rep.max_len \(2\)"),
    (["task.rep.min_len=-3"], "task.rep.min_len must be >= 1, got -3"),
    (["task.min_len=-3"], "task.rep.min_len must be >= 1, got -3"),
    (["optim.grad_clip=-1"], "optim.grad_clip must be > 0, got -1.0"),
    (["loss.clip_low=-3"], r"loss.clip_low must be in \[0, 1\), got -3.0"),
    (["loss.kl_coef=-1"], "loss.kl_coef must be >= 0, got -1.0"),
    (["threads=-4"], "threads must be >= 0, got -4"),
    (["eval.every=-1"], "eval.every must be >= 0, got -1"),
    (["log.dump_samples=-2"], "log.dump_samples must be >= 0, got -2"),
    (["steps=["], "not valid YAML"),
])
def test_meaningless_values_are_refused(overrides, message, tmp_path, capsys):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("steps: 1\n")
    assert main(["train", str(cfg), *overrides]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trajkit: error: ") and err.count("\n") == 1


def test_yaml_syntax_error_names_the_line(tmp_path, capsys):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("steps: 2\noptim: [1\n")
    assert main(["train", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert f"config file {cfg}: line 3, column 1: not valid YAML" in err and err.count("\n") == 1


def test_python_construction_is_checked_too():
    with pytest.raises(ConfigError, match="optim.beta2 must be in"):
        OptimConfig(beta2=1.0)
    assert OptimConfig(beta1=0.0, weight_decay=0.0).beta1 == 0.0  # interval ends that are allowed


@pytest.mark.parametrize("argv", [
    ["train", "c.yaml", "steps=1", "--no-progress", "seed=2"],
    ["train", "c.yaml", "--no-progress", "steps=1", "seed=2"],
    ["train", "c.yaml", "steps=1", "seed=2", "--no-progress"],
])
def test_no_progress_anywhere_among_the_overrides(argv):
    args = parse(build_parser(), argv)
    assert args.no_progress and args.overrides == ["steps=1", "seed=2"]


def test_unknown_flags_are_still_refused(capsys):
    with pytest.raises(SystemExit):
        parse(build_parser(), ["train", "c.yaml", "steps=1", "--bogus"])
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
