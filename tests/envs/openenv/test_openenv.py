"""OpenEnv environments (real ``openenv-core``): episodes in process and over a local server's ``/ws``, the
adapter, ``envs check`` (reference, NOP, probes) and ``task.name=openenv`` GRPO steps whose trained tokens are
the gateway's sampled ids and whose rewards are the environment's (recomputed here from the replies)."""
import json
import random

import pytest

pytest.importorskip("openenv.core", reason="openenv-core is not installed (pip install -e '.[test]')")

from tests.envs.openenv import envs as test_envs  # noqa: E402
from tests.rl.conftest import TINY, one_thread  # noqa: E402,F401 (autouse: tiny models on one thread)
from trajkit.envs.openenv import examples  # noqa: E402
from trajkit.envs.openenv.check import SHOTGUN, check_env  # noqa: E402
from trajkit.envs.openenv.connect import ActionError, InProcess, opener, ws_url  # noqa: E402
from trajkit.envs.openenv.episode import TextAdapter, adapter_for, nop, run_episode  # noqa: E402
from trajkit.envs.openenv.server import serving  # noqa: E402
from trajkit.errors import ConfigError  # noqa: E402
from trajkit.rl.config import load_config  # noqa: E402
from trajkit.envs.sample import validate_sample  # noqa: E402
from trajkit.rl.trainer import Trainer  # noqa: E402

SUM = "trajkit.envs.openenv.examples:SumEnv"
GUESS = "trajkit.envs.openenv.examples:GuessEnv"


@pytest.fixture(scope="module")
def guess_server():
    with serving(examples.GuessEnv) as url:
        yield url


def _binary_search_turns(secret: int, high: int = examples.HIGH) -> int:
    low, turns = 1, 0
    while True:
        guess, turns = (low + high) // 2, turns + 1
        if guess == secret:
            return turns
        low, high = (guess + 1, high) if guess < secret else (low, guess - 1)


def test_sum_episodes_pay_the_right_sum_only():
    connect = opener(SUM, None)
    for seed in range(6):
        rng = random.Random(seed)
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        assert run_episode(connect, TextAdapter(), examples.sum_solver, seed, 3).rewards == [1.0]
        wrong = run_episode(connect, TextAdapter(), lambda m, s=a + b: str(s + 1), seed, 3)
        assert (wrong.rewards, wrong.done, wrong.turns) == ([0.0], True, 1)
        assert run_episode(connect, TextAdapter(), lambda m, s=a + b: f" {s}.\n", seed, 3).reward == 1.0
        # the last integer is the answer: the working may precede it, a second candidate may not follow it
        assert run_episode(connect, TextAdapter(), lambda m, s=a + b: f"{a} + {b} = {s}", seed, 3).reward == 1.0
        assert run_episode(connect, TextAdapter(), lambda m, s=a + b: f"{s} or {s + 1}", seed, 3).reward == 0.0


def test_guess_over_the_socket_equals_in_process_and_the_hand_count(guess_server):
    local, remote = opener(GUESS, None), opener(None, guess_server)
    for seed in range(8):
        secret = random.Random(seed).randint(1, examples.HIGH)
        a = run_episode(local, TextAdapter(), examples.guess_solver, seed, 8)
        b = run_episode(remote, TextAdapter(), examples.guess_solver, seed, 8)
        assert a == b
        assert (a.reward, a.done, a.turns) == (1.0, True, _binary_search_turns(secret))
        assert a.rewards == [0.0] * (a.turns - 1) + [1.0]
    # the episode ends at done (4 wasted guesses) even when max_turns allows more; max_turns cuts it short
    assert run_episode(remote, TextAdapter(), nop, 0, 8).turns == examples.MAX_GUESSES
    cut = run_episode(remote, TextAdapter(), nop, 0, 2)
    assert (cut.turns, cut.done, cut.reward) == (2, False, 0.0)


def test_a_reply_that_is_not_an_action_ends_the_episode_as_the_policys_fault(guess_server):
    class Strict(TextAdapter):
        def parse(self, reply):
            if not reply.isdigit():
                raise ValueError(f"not a number: {reply!r}")
            return {"message": reply}
    for connect in (opener(GUESS, None), opener(None, guess_server)):
        ep = run_episode(connect, Strict(), lambda m: "five", 0, 4)
        assert (ep.reward, ep.turns, ep.done) == (0.0, 1, False) and ep.error == "action: not a number: 'five'"
        bad = run_episode(connect, TextAdapter(action_field="answer"), examples.guess_solver, 0, 4)
        assert bad.reward == 0.0 and bad.error.startswith("action:") and "answer" in bad.error


def test_an_environment_failure_is_unscorable_not_zero():
    ep = run_episode(opener("tests.envs.openenv.envs:CrashEnv", None), TextAdapter(), examples.sum_solver, 0, 3)
    assert ep.reward is None and "grader crashed" in ep.error
    gone = run_episode(opener(None, "ws://127.0.0.1:9"), TextAdapter(), examples.sum_solver, 0, 3)
    assert gone.reward is None and "cannot connect" in gone.error


def test_only_loopback_servers_and_exactly_one_source():
    assert ws_url("127.0.0.1:8011") == ws_url("http://127.0.0.1:8011/") == "ws://127.0.0.1:8011/ws"
    for url in ("ws://example.com:80", "wss://127.0.0.1:1", "ws://10.0.0.1:8011"):
        with pytest.raises(ConfigError, match="loopback"):
            ws_url(url)
    with pytest.raises(ConfigError, match="exactly one"):
        opener(SUM, "ws://127.0.0.1:1")
    with pytest.raises(ConfigError, match="exactly one of task.openenv.env"):
        load_config(None, TINY + ["task.name=openenv"])


def test_the_default_adapter_reads_the_action_schema():
    schema = InProcess(examples.SumEnv).action_cls.model_json_schema()
    assert adapter_for(schema).action_field == "message"
    with pytest.raises(ValueError, match="2 string fields"):
        adapter_for({"properties": {"a": {"type": "string"}, "b": {"type": "string"}}})
    assert TextAdapter().render({"prompt": "hi", "step": 3}) == "hi"
    assert TextAdapter().render({"board": [1, 2], "step": 3}) == '{"board": [1, 2], "step": 3}'


@pytest.mark.parametrize("env, reference, verdict", [
    (SUM, examples.sum_solver, "ok"),
    (GUESS, examples.guess_solver, "ok"),
    ("tests.envs.openenv.envs:LenientSumEnv", examples.sum_solver, "hackable: shotgun"),
    ("tests.envs.openenv.envs:GullibleSumEnv", examples.sum_solver, "hackable: claim"),
    ("tests.envs.openenv.envs:FreeEnv", examples.sum_solver, "vacuous"),
    ("tests.envs.openenv.envs:CrashEnv", examples.sum_solver, "env error"),
    (SUM, test_envs.wrong_solver, "wrong solution"),
])
def test_envs_check_verdicts(env, reference, verdict):
    row = check_env(env, opener(env, None), TextAdapter(), reference, episodes=4, max_turns=8, adversarial=True)
    assert row.verdict == verdict, row
    if verdict == "ok":
        assert (row.reference, row.nop) == (1.0, 0.0)
        assert row.hacks == {"echo": "blocked", "shotgun": "blocked", "claim": "blocked", "overlong": "blocked"}


def test_envs_check_over_the_socket(guess_server):
    row = check_env(guess_server, opener(None, guess_server), TextAdapter(), examples.guess_solver, episodes=3,
                    adversarial=True)
    assert row.ok and row.hacks["shotgun"] == "blocked" and str(examples.HIGH) in SHOTGUN


def openenv_config(tmp_path, *extra):
    return load_config(None, TINY + [f"log.out_dir={tmp_path / 'run'}", "task.name=openenv", "task.max_turns=2",
                                     "rollout.prompts_per_step=1", "rollout.group_size=2",
                                     "rollout.max_new_tokens=12", "optim.micro_batch_size=2", *extra])


def _check_step(trainer, result):
    gateway = trainer.state.task.env.gateway
    for s in result.samples:
        validate_sample(s)
        records = gateway.sessions.find(s.metadata["session"]).records
        assert [t for t, m in zip(s.completion_ids, s.loss_mask) if m] == \
            [t for r in records for t in r.choices[0].token_ids]
        assert [lp for lp, m in zip(s.logprobs, s.loss_mask) if m] == \
            [lp for r in records for lp in r.choices[0].logprobs]
        episode = json.loads(s.metadata["columns"]["harness_output"])
        replies = [r.choices[0].message["content"] or "" for r in records]
        assert episode["turns"] == len(records) == 2 and episode["error"] is None
        # the environment's reward recomputed from the replies the gateway sent back
        assert s.raw_reward == pytest.approx(sum(len(x) for x in replies) / 100) == episode["reward"]
    assert result.metrics["mismatch/max_abs"] < 1e-4


@pytest.mark.parametrize("source", ["env", "url"])
def test_a_grpo_step_trains_the_gateways_ids_with_the_environments_rewards(tmp_path, source):
    if source == "env":
        config = openenv_config(tmp_path, "task.openenv.env=tests.envs.openenv.envs:LengthEnv")
        trainer = Trainer(config, logger=False)
        try:
            _check_step(trainer, trainer.step_once())
        finally:
            trainer.close()
        return
    with serving(test_envs.LengthEnv) as url:
        trainer = Trainer(openenv_config(tmp_path, f"task.openenv.url={url}"), logger=False)
        try:
            _check_step(trainer, trainer.step_once())
        finally:
            trainer.close()


def test_an_action_that_does_not_validate_is_an_action_error():
    conn = InProcess(examples.SumEnv)
    conn.reset(0)
    with pytest.raises(ActionError, match="TextAction"):
        conn.step({"message": 3})


def test_the_cli_checks_an_openenv_environment(capsys):
    from trajkit.cli.main import main

    assert main(["envs", "check", "--openenv", SUM, "--reference", "trajkit.envs.openenv.examples:sum_solver",
                 "--episodes", "2", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert (row["verdict"], row["reference"], row["nop"], row["episodes"]) == ("ok", 1.0, 0.0, 2)
    assert main(["envs", "check", "--openenv", "tests.envs.openenv.envs:FreeEnv", "--reference",
                 "trajkit.envs.openenv.examples:sum_solver", "--episodes", "2"]) == 1
    assert "vacuous" in capsys.readouterr().out
    assert main(["envs", "check", "--openenv", SUM]) == 2
    assert "--reference" in capsys.readouterr().err


def test_a_server_at_create_apps_one_session_stops_the_run_naming_the_limit(tmp_path):
    """OpenEnv's server with one session at a time (create_app's default) and a group of 4: while one session
    is held, every episode's connection is closed before it is answered (ConnectionClosedOK) or answered "Server
    at capacity", each is the
    environment's failure (masked, counted in env/failed), and the step stops the run with an error naming the
    session limit and its fix, instead of training on a reward of 0. With sessions enough, the same step trains."""
    from trajkit.envs.openenv.connect import Socket
    from trajkit.rl.scoring import EnvironmentFailed

    group = ["rollout.group_size=4"]
    with serving(test_envs.LengthEnv, max_concurrent_envs=1) as url:
        trainer = Trainer(openenv_config(tmp_path, f"task.openenv.url={url}", *group), logger=False)
        try:
            trainer.state.task.prompt(0)  # the step's one prompt (its first observation is read once, here)
            held = Socket(url)  # the one session the server has
            try:
                # the server either closes the session at once or answers "Server at capacity": both name the limit
                with pytest.raises(EnvironmentFailed, match=r"step 0: 4 of 4 episodes failed for the environment's "
                                   r"reason.*(closed the session before answering reset \(ConnectionClosedOK|"
                                   r"Server at capacity).*max_concurrent_envs sessions at once"):
                    trainer.step_once()
            finally:
                held.close()
        finally:
            trainer.close()
    with serving(test_envs.LengthEnv, max_concurrent_envs=4) as url:
        trainer = Trainer(openenv_config(tmp_path, f"task.openenv.url={url}", *group), logger=False)
        try:
            result = trainer.step_once()
        finally:
            trainer.close()
    assert result.metrics["env/failed"] == 0.0 and result.metrics["reward/unscorable"] == 0.0
    _check_step(trainer, result)
