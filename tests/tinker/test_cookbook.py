"""tinker-cookbook 0.5.8 recipes, run in the cookbook's own venv (``make tinker-cookbook-venv``), against
``trajkit serve --api tinker`` as a process on a tiny random model (byte tokenizer, ``role_colon``
renderer), offline: the supervised loop (``supervised.train`` on the shipped
``example_data/conversations.jsonl``, through ``examples/tinker_cookbook/sl_conversations.py``) and
``recipes.math_rl.train`` with its synthetic ``arithmetic`` environment, unchanged, from its CLI. Each runs
two steps; the test reads the recipe's own ``metrics.jsonl`` (a loss or a reward per step, finite) and the
checkpoints the recipe's final save wrote through the server. ~10-15 s each on two cores; the tiny model keeps
them in seconds (SmolLM2 takes ~5 s a step: docs/tinker.md)."""
import json
import math
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail
from tests.tinker.test_cli import _start
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cookbook(request, tinker_cookbook_venv) -> Path:
    """The cookbook venv's python (built in the background by ``make test``: :mod:`tests.side_venvs`)."""
    python = tinker_cookbook_venv / "bin" / "python"
    if not python.is_file():
        skip_or_fail(request, f"the tinker-cookbook venv is missing ({python}): run `make tinker-cookbook-venv`")
    return python


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(URL, model folder, checkpoint dir) of ``trajkit serve --api tinker`` over a tiny model whose served name
    is its folder (the cookbook loads the tokenizer by that name: a path keeps it offline)."""
    folder = tmp_path_factory.mktemp("tiny-cookbook")
    build_model(TinySpec(vocab_size=259, hidden_size=32, num_layers=1, max_positions=1024), seed=0).save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    ck = tmp_path_factory.mktemp("ck")
    proc, url = _start(["serve", "--api", "tinker", "--model", str(folder), "--model-name", str(folder),
                        "--port", "0", "--checkpoint-dir", str(ck)])
    try:
        yield url, str(folder), ck
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _run(python: Path, argv: list[str], cwd: Path) -> None:
    env = {**os.environ, "TINKER_API_KEY": "tml-local", "TINKER_TELEMETRY": "0", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    env.pop("PYTHONPATH", None)  # the cookbook venv's own packages only
    done = subprocess.run([str(python), *argv], cwd=str(cwd), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]


def _metrics(log_path: Path) -> list[dict]:
    return [json.loads(line) for line in (log_path / "metrics.jsonl").read_text().splitlines() if line.strip()]


def _final_checkpoints(ck: Path) -> set[str]:
    return {p.parent.name + "/" + p.name for p in ck.glob("*/*/final")}


def test_supervised_recipe_runs_two_steps(cookbook, served, tmp_path):
    url, model, ck = served
    log = tmp_path / "sl"
    _run(cookbook, [str(ROOT / "examples" / "tinker_cookbook" / "sl_conversations.py"), "--base-url", url,
                    "--model", model, "--renderer", "role_colon", "--steps", "2", "--batch-size", "2",
                    "--max-length", "128", "--rank", "2", "--lr", "1e-3", "--log-path", str(log)], tmp_path)
    rows = _metrics(log)
    assert [r["step"] for r in rows] == [0, 1]
    for r in rows:
        assert math.isfinite(r["train_mean_nll"]) and r["train_mean_nll"] > 0, r
        assert r["num_sequences"] == 2 and r["num_tokens"] > 0, r
        assert math.isfinite(r["grad_norm:mean"]) and r["grad_norm:mean"] > 0, r  # the loss reached the adapter
    assert {"weights/final", "sampler_weights/final"} <= _final_checkpoints(ck)


def test_math_rl_recipe_runs_two_steps(cookbook, served, tmp_path):
    url, model, ck = served
    log = tmp_path / "rl"
    _run(cookbook, ["-m", "tinker_cookbook.recipes.math_rl.train", f"model_name={model}", "renderer_name=role_colon",
                    f"base_url={url}", "env=arithmetic", "group_size=4", "groups_per_batch=2", "learning_rate=1e-3",
                    "max_tokens=8", "max_steps=2", "eval_every=0", "save_every=0", "lora_rank=2",
                    f"log_path={log}", "behavior_if_log_dir_exists=delete"], tmp_path)
    rows = _metrics(log)
    assert [r["step"] for r in rows] == [0, 1]
    for r in rows:
        assert r["env/all/total_episodes"] == 8, r  # 2 groups of 4, every one sampled through the server
        assert math.isfinite(r["env/all/reward/total"]), r
        assert 1 <= r["env/all/ac_tokens_per_turn"] <= 8, r  # max_tokens=8 honoured
        # the sampler's log-probs against the training forward's on the same tokens: equal but for float rounding
        assert abs(r["optim/kl_sample_train_v1"]) < 1e-4, r
    assert "weights/final" in _final_checkpoints(ck)
