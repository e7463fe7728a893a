"""``task.name=verifiers`` with the real verifiers 0.4.0 in its venv (``make verifiers-venv``): the example taskset
``vf-sum`` run by verifiers' ``null`` harness in its subprocess runtime, through ``TrainClient`` against the
trainer's gateway. A GRPO step on the tiny random policy must train exactly the ids the gateway sampled (with
its log-probs), and each sample's reward must be the taskset's rubric recomputed here from the reply the gateway
sent back and the task's own numbers (``random.Random(i)``, as the taskset draws them)."""
import json
import random
import re

import pytest

from tests.envs.verifiers.conftest import needs_verifiers  # noqa: F401 (fixture)
from tests.rl.conftest import TINY, one_thread  # noqa: F401 (autouse: tiny models on one thread)
from trajkit.envs.sample import validate_sample
from trajkit.errors import ConfigError
from trajkit.rl.config import load_config
from trajkit.rl.trainer import Trainer


def vf_config(tmp_path, *extra):
    return load_config(None, TINY + [f"log.out_dir={tmp_path / 'run'}", "task.name=verifiers", "task.env=vf-sum",
                                     "rollout.prompts_per_step=2", "rollout.group_size=2",
                                     "rollout.max_new_tokens=8", "optim.micro_batch_size=4", *extra])


def sum_of_task(idx: int) -> int:
    rng = random.Random(idx)
    return rng.randint(1, 9) + rng.randint(1, 9)


def rubric(reply: str, idx: int) -> float:
    found = re.findall(r"-?\d+", reply)
    return 1.0 if found and int(found[-1]) == sum_of_task(idx) else 0.0


def test_a_grpo_step_trains_the_gateways_ids_with_the_tasksets_rewards(tmp_path, needs_verifiers):
    trainer = Trainer(vf_config(tmp_path), logger=False)
    try:
        result = trainer.step_once()
        gateway = trainer.state.task.env.gateway
        assert len(result.samples) == 4
        for s in result.samples:
            validate_sample(s)
            assert "harness_error" not in s.metadata, s.metadata.get("harness_error")
            records = gateway.sessions.find(s.metadata["session"]).records
            assert len(records) >= 1 and all(r.endpoint == "generate" for r in records)
            # trained ids == the gateway's sampled ids, log-probs equal, masked exactly there
            assert [t for t, m in zip(s.completion_ids, s.loss_mask) if m] == \
                [t for r in records for t in r.choices[0].token_ids]
            assert [lp for lp, m in zip(s.logprobs, s.loss_mask) if m] == \
                [lp for r in records for lp in r.choices[0].logprobs]
            episode = json.loads(s.metadata["columns"]["harness_output"])
            assert episode["error"] is None and episode["turns"] == len(records)
            # the reply verifiers scored is the text the gateway decoded from its sampled ids
            tokenizer = trainer.state.task.tokenizer
            sampled = [tokenizer.decode(r.choices[0].token_ids, skip_special_tokens=True) for r in records]
            assert [x.strip() for x in episode["replies"]] == [x.strip() for x in sampled]
            idx = s.metadata["columns"]["vf_task"]
            assert s.raw_reward == episode["reward"] == rubric(episode["replies"][-1], idx)
        assert result.metrics["mismatch/max_abs"] < 1e-4
    finally:
        trainer.close()


def test_a_taskset_verifiers_cannot_load_is_one_clear_error(needs_verifiers):
    from trajkit.envs.registry import TaskConfig, VerifiersOptions
    from trajkit.envs.verifiers.rltask import make_task
    from trajkit.models.tokenizer import byte_tokenizer

    with pytest.raises(ConfigError, match=r"task.verifiers.env=no-such-taskset: verifiers could not load the taskset: .*"
                                          r"taskset 'no-such-taskset' not found"):
        make_task(TaskConfig(name="verifiers", options=VerifiersOptions(env="no-such-taskset")), 0, byte_tokenizer())
    with pytest.raises(ConfigError, match="task.verifiers.env_config must be a JSON object"):
        make_task(TaskConfig(name="verifiers", options=VerifiersOptions(env="vf-sum", env_config="[1]")), 0,
                  byte_tokenizer())


def test_the_taskset_id_is_required(tmp_path):
    with pytest.raises(ConfigError, match="task.verifiers.env=TASKSET_ID"):
        load_config(None, TINY + ["task.name=verifiers"])


def test_a_missing_setup_names_make_verifiers_venv(tmp_path, monkeypatch):
    from trajkit.envs.verifiers.process import offline_env

    python = tmp_path / "venv" / "bin" / "python"
    monkeypatch.setenv("TRAJKIT_VERIFIERS_PYTHON", str(python))
    with pytest.raises(ConfigError, match=r"verifiers' venv is missing .*run `make verifiers-venv`"):
        offline_env()
    python.parent.mkdir(parents=True)
    python.touch()
    with pytest.raises(ConfigError, match=r"offline package index .* is missing .*run `make verifiers-venv`"):
        offline_env()
    (tmp_path / "venv" / "trajkit-offline").mkdir()
    (tmp_path / "venv" / "trajkit-offline" / "ready").write_text("0\n")
    env = offline_env()
    assert env["UV_PYTHON"] == str(python) and env["UV_PYTHON_DOWNLOADS"] == "never"
    assert env["UV_DEFAULT_INDEX"] == (tmp_path / "venv" / "trajkit-offline" / "simple").as_uri()
    assert env["UV_CACHE_DIR"] == str(tmp_path / "venv" / "trajkit-offline" / "uv-cache")
