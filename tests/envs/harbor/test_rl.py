"""``task.name=harbor``: GRPO steps whose episodes are Harbor trials (trajkit's shell agent in a sandbox, its
model the gateway over the trainer's engine). Checked against the gateway's records (the trained tokens are
exactly the sampled ids, with the engine's log-probs) and against the trials' own reward files; failed trials
score 0 (only infrastructure failures are masked), never fatal."""
import json
import shutil

import pytest

from tests.envs.harbor.conftest import BROKEN, JUDGE_REPLY, SHIPPED, SOLVE
from tests.rl.conftest import TINY, one_thread  # noqa: F401 (autouse: tiny models on one thread)
from trajkit.rl.config import load_config
from trajkit.envs.sample import validate_sample
from trajkit.rl.trainer import Trainer


# A task's agent limit is wall-clock time (60 s for hello-file). A host that stops this VM's CPUs for a minute
# (seen once in CI: the kernel logged its RCU thread starved for 59 s, mid-round) would turn a shell agent's
# first call into an agent timeout, i.e. an episode without a call. These tests are about what a trial records,
# not its time limits (tests/envs/harbor/test_loop.py checks the multiplier), so the agent gets 20x the time.
SLACK = "task.harbor.timeout_multiplier=20"


def harbor(tmp_path, path, *extra):
    return load_config(None, TINY + [f"log.out_dir={tmp_path / 'run'}", "task.name=harbor", f"task.path={path}",
                                     "task.max_turns=2", "rollout.prompts_per_step=1", "rollout.group_size=2",
                                     "rollout.max_new_tokens=24", "optim.micro_batch_size=2", SLACK, *extra])


def _sampled(trainer, sample):
    records = trainer.state.task.env.gateway.sessions.find(sample.metadata["session"]).records
    return records, [t for r in records for t in r.choices[0].token_ids]


def test_a_grpo_step_on_a_harbor_task_trains_the_gateways_exact_tokens(needs_sandbox, tmp_path):
    trainer = Trainer(harbor(tmp_path, SHIPPED / "hello-file"), logger=False)
    try:
        result = trainer.step_once()
    finally:
        trainer.close()
    assert len(result.samples) == 2 and result.metrics["reward/unscorable"] == 0.0
    for s in result.samples:
        validate_sample(s)
        records, sampled = _sampled(trainer, s)
        assert 1 <= len(records) <= 2  # the shell agent's calls: one per reply, at most task.max_turns
        assert [t for t, m in zip(s.completion_ids, s.loss_mask) if m] == sampled
        assert [lp for lp, m in zip(s.logprobs, s.loss_mask) if m] == [lp for r in records
                                                                      for lp in r.choices[0].logprobs]
        trial = json.loads(s.metadata["columns"]["harness_output"])
        assert trial["task"] == "hello-file" and trial["error"] is None
        assert s.raw_reward == trial["reward"] == 0.0  # a random policy writes no /app/hello.txt
        assert set(trial["seconds"]) == {"sandbox", "agent", "verifier", "stop"}
        assert s.metadata["completion"][0]["role"] == "assistant"
    assert result.metrics["mismatch/max_abs"] < 1e-4


def test_failed_trials_score_zero_and_only_infra_failures_are_masked(needs_sandbox, tmp_path, monkeypatch):
    """Every trial of the round times out in its verifier (what an agent's FIFO answer does): each scores 0,
    trained on, not masked. Then no sandbox starts: the step stops with the sandbox's error (more than
    rollout.max_env_failed of its episodes failed for the environment's reason); with max_env_failed 1 it runs,
    each sample unscorable and counted in env/failed."""
    from trajkit.rl.scoring import EnvironmentFailed
    from trajkit.envs.sandbox.base import SandboxError
    from trajkit.envs.sandbox.namespace import NamespaceSandbox

    tasks = tmp_path / "tasks"
    shutil.copytree(BROKEN / "slow-verifier", tasks / "slow-verifier")
    trainer = Trainer(harbor(tmp_path, tasks), logger=False)
    try:
        result = trainer.step_once()

        def refuse(self):
            raise SandboxError("namespace sandbox: no free slot")
        monkeypatch.setattr(NamespaceSandbox, "start", refuse)
        with pytest.raises(EnvironmentFailed, match=r"step 1: 2 of 2 episodes failed for the environment's reason, "
                           r"more than rollout.max_env_failed = 0.5 .*no free slot"):
            trainer.step_once()
        trainer.state.cfg.rollout.max_env_failed = 1.0
        masked = trainer.step_once()
    finally:
        trainer.close()
    assert (result.metrics["reward/unscorable"], result.metrics["env/failed"]) == (0.0, 0.0)
    for s in result.samples:
        trial = json.loads(s.metadata["columns"]["harness_output"])
        assert trial["failed_phase"] == "verifier" and "timeout_sec = 1 s" in trial["error"]
        assert trial["cause"] == "agent" and s.raw_reward == 0.0
        assert [t for t, m in zip(s.completion_ids, s.loss_mask) if m] == _sampled(trainer, s)[1]
    assert (masked.metrics["reward/unscorable"], masked.metrics["env/failed"]) == (1.0, 1.0)
    for s in masked.samples:
        trial = json.loads(s.metadata["columns"]["harness_output"])
        assert (trial["cause"], trial["failed_phase"]) == ("infra", "sandbox")
        assert s.raw_reward is None and s.advantage == 0.0


def test_a_harbor_task_needs_its_folder():
    from trajkit.errors import ConfigError

    with pytest.raises(ConfigError, match="task.name=harbor needs task.path=DIR"):
        load_config(None, TINY + ["task.name=harbor"])


def test_a_scripted_policy_solves_the_task_in_the_sandbox_and_gets_the_verifiers_reward(needs_sandbox, tmp_path,
                                                                                          scripted_policy):
    model, tokenizer = scripted_policy
    trainer = Trainer(harbor(tmp_path, SHIPPED / "hello-file", "rollout.max_new_tokens=48"), model=model,
                      tokenizer=tokenizer, logger=False)
    try:
        result = trainer.step_once()
    finally:
        trainer.close()
    for s in result.samples:
        records, sampled = _sampled(trainer, s)
        assert [m["content"] for m in s.metadata["completion"]] == [SOLVE, "exit code: 0\n", "Done."]
        assert [t for t, m in zip(s.completion_ids, s.loss_mask) if m] == sampled and len(records) == 2
        # the reply's command ran in the sandbox: the verifier (not the policy's text) gave the reward
        assert s.raw_reward == json.loads(s.metadata["columns"]["harness_output"])["reward"] == 1.0
        assert tokenizer.decode([t for t, m in zip(s.completion_ids, s.loss_mask) if not m]).count("exit code: 0") == 1
    assert result.metrics["reward/raw"] == 1.0 and result.metrics["mismatch/max_abs"] < 1e-4


def test_a_grpo_step_with_smollm2_on_a_harbor_task(needs_sandbox, tmp_path, smollm2_folder):
    cfg = harbor(tmp_path, SHIPPED / "hello-file", "policy.source=path", f"policy.path={smollm2_folder}",
                 "task.max_turns=1", "rollout.max_new_tokens=32", "threads=2", "optim.lr=1e-5")
    trainer = Trainer(cfg, logger=False)
    try:
        result = trainer.step_once()
    finally:
        trainer.close()
    assert len(result.samples) == 2
    for s in result.samples:
        validate_sample(s)
        records, sampled = _sampled(trainer, s)
        assert len(records) == 1 and [t for t, m in zip(s.completion_ids, s.loss_mask) if m] == sampled
        trial = json.loads(s.metadata["columns"]["harness_output"])
        assert trial["error"] is None and s.raw_reward == trial["reward"]
        assert "<|im_start|>system" in trainer.state.tokenizer.decode(s.prompt_ids)  # SmolLM2's own template


def test_with_a_judge_the_reward_is_polars_rubric_reward(needs_sandbox, tmp_path, scripted_folder):
    """The scripted policy solves hello-file (outcome 1) and the scripted judge, served by a second gateway,
    scores the run 4: reward 1 + 0.2 * 4 / 5 for every sample."""
    from trajkit.engine import Engine
    from trajkit.gateway import Gateway, GatewayConfig, running
    from trajkit.models.load import load_model, load_tokenizer

    tokenizer = load_tokenizer(scripted_folder / "tokenizer")
    judge = Gateway(Engine(load_model(scripted_folder / "model")), tokenizer,
                    GatewayConfig(model_name="judge", default_max_tokens=64))
    with running(judge) as url:
        cfg = harbor(tmp_path, SHIPPED / "hello-file", "rollout.max_new_tokens=48", f"task.judge_url={url}")
        trainer = Trainer(cfg, model=load_model(scripted_folder / "model"), tokenizer=tokenizer, logger=False)
        try:
            result = trainer.step_once()
        finally:
            trainer.close()
    judge.close()
    for s in result.samples:
        trial = json.loads(s.metadata["columns"]["harness_output"])
        assert (trial["outcome"], trial["judge_score"], trial["judge_fallback"]) == (1.0, 4.0, None)
        assert s.raw_reward == pytest.approx(1.16)
