"""The RL half of the agentic loop on Harbor tasks: held-out eval on other tasks (``task.eval_path``) and every
step's episodes saved as OpenAI rows and ATIF trajectories that ``trajkit traces`` reads, checked against the
step's own samples; with the scripted policy (deterministic: it solves hello-file, nothing else)."""
import json
import shutil

import pytest

from tests.envs.harbor.conftest import SHIPPED, SOLVE
from tests.envs.harbor.test_rl import harbor
from tests.rl.conftest import one_thread  # noqa: F401 (autouse: tiny models on one thread)
from trajkit.cli.main import main
from trajkit.errors import ConfigError
from trajkit.rl.trainer import Trainer
from trajkit.traces.atif import from_atif


def _heldout(tmp_path):
    """count-errors (the policy fails it) and a renamed copy of hello-file (it solves it)."""
    held = tmp_path / "heldout"
    shutil.copytree(SHIPPED / "count-errors", held / "count-errors")
    shutil.copytree(SHIPPED / "hello-file", held / "hello-again")
    toml = held / "hello-again" / "task.toml"
    toml.write_text(toml.read_text().replace('name = "hello-file"', 'name = "hello-again"'))
    return held


def test_eval_runs_on_the_heldout_tasks_and_episodes_are_saved_as_traces(needs_sandbox, tmp_path, scripted_policy,
                                                                         capsys):
    model, tokenizer = scripted_policy
    cfg = harbor(tmp_path, SHIPPED / "hello-file", f"task.eval_path={_heldout(tmp_path)}", "eval.every=1",
                 "eval.num_prompts=2", "eval.temperature=0.0", "rollout.max_new_tokens=48", "log.dump_samples=4")
    trainer = Trainer(cfg, model=model, tokenizer=tokenizer)
    try:
        assert trainer.state.task.eval_names == ["count-errors", "hello-again"]
        result = trainer.step_once()
    finally:
        trainer.close()
    assert result.metrics["eval/reward"] == 0.5  # hello-again solved, count-errors not: held-out, not train
    samples = tmp_path / "run" / "samples"
    rows = [json.loads(x) for x in (samples / "step_000001.openai.jsonl").read_text().splitlines()]
    docs = [json.loads(x) for x in (samples / "step_000001.atif.jsonl").read_text().splitlines()]
    assert len(rows) == len(docs) == len(result.samples) == 2
    for s, row, doc in zip(result.samples, rows, docs):
        assert row["messages"] == s.metadata["prompt"] + s.metadata["completion"] == from_atif(doc)
        assert [m["content"] for m in row["messages"][-3:]] == [SOLVE, "exit code: 0\n", "Done."]
        assert row["metadata"]["reward"] == doc["extra"]["reward"] == s.raw_reward == 1.0
        assert row["task"] == doc["extra"]["task"] == "hello-file"
    for name in ("step_000001.openai.jsonl", "step_000001.atif.jsonl"):
        assert main(["traces", "stats", str(samples / name), "--json"]) == 0
        stats = json.loads(capsys.readouterr().out)
        assert (stats["traces"], stats["assistant_turns"]) == (2, 4)


def test_heldout_tasks_must_be_other_tasks(tmp_path, scripted_policy):
    model, tokenizer = scripted_policy
    cfg = harbor(tmp_path, SHIPPED, f"task.eval_path={SHIPPED}")
    with pytest.raises(ConfigError, match="also in task.path"):
        Trainer(cfg, model=model, tokenizer=tokenizer, logger=False)


def test_the_timeout_multiplier_scales_every_agent_limit_train_and_heldout_not_the_verifiers(tmp_path,
                                                                                             scripted_policy):
    from trajkit.envs.harbor.task import load_task

    model, tokenizer = scripted_policy
    held = _heldout(tmp_path)
    cfg = harbor(tmp_path, SHIPPED / "hello-file", f"task.eval_path={held}", "task.harbor.timeout_multiplier=2.5")
    trainer = Trainer(cfg, model=model, tokenizer=tokenizer, logger=False)
    try:
        tasks = trainer.state.task.tasks
    finally:
        trainer.close()
    sources = {"hello-file": SHIPPED / "hello-file", "count-errors": held / "count-errors",
               "hello-again": held / "hello-again"}
    assert sorted(tasks) == sorted(sources)
    for name, folder in sources.items():
        source = load_task(folder)
        assert tasks[name].agent.timeout_sec == 2.5 * source.agent.timeout_sec
        assert tasks[name].verifier.timeout_sec == source.verifier.timeout_sec
    with pytest.raises(ConfigError, match="timeout_multiplier"):
        harbor(tmp_path, SHIPPED / "hello-file", "task.harbor.timeout_multiplier=0")
