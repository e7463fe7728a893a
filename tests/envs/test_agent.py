"""Training through the gateway: an agent task whose episodes are harness runs against a gateway over the
trainer's engine. Checked against the gateway's own records: the samples' trained tokens are exactly the
sampled ids, their log-probs the engine's (and, sampled at the trainer's temperature whatever the harness
asked, equal to the policy's recomputed ones), and the policy version advances with every step."""
import dataclasses
import json
import sys
import threading
from pathlib import Path

import openai
import pytest
import torch

from tests.rl.test_async import wait_for
from trajkit.errors import ConfigError
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.rl import Trainer
from trajkit.envs.agent import AgentTask, EnvironmentDied, HarnessError, HarnessRun, command_harness
from trajkit.gateway import GatewayConfig
from trajkit.rl.rollout import CountingClient
from trajkit.envs.sample import validate_sample

HARNESS = Path(__file__).with_name("agent_harness.py")
ROWS = [{"prompt": f"Say {w}.", "answer": w} for w in ("yes", "no", "maybe", "ok")]


def two_turns(run: HarnessRun) -> str:
    """The harness as a Python callable: two chat turns, asking for sampling the gateway must override."""
    client = openai.OpenAI(base_url=run.base_url, api_key=run.api_key, max_retries=0)
    messages = [{"role": "user", "content": run.task}]
    first = client.chat.completions.create(model=run.model, messages=messages, temperature=0.3, top_p=0.8)
    messages += [{"role": "assistant", "content": first.choices[0].message.content or ""},
                 {"role": "user", "content": "Once more."}]
    second = client.chat.completions.create(model=run.model, messages=messages, temperature=0.3, top_p=0.8)
    return second.choices[0].message.content or ""


def odd_length(completions, harness_output, **kwargs) -> list[float]:
    """A verifier with a spread of values: the final reply's length is odd (and it is the harness's output);
    None (unscorable) for a failed run."""
    assert all(c[-1]["content"] == out for c, out in zip(completions, harness_output) if out is not None)
    return [None if out is None else float(len(out) % 2) for out in harness_output]


def _trainer(tiny, *overrides, eval=None):
    """A trainer on the two-turn agent task over ``ROWS`` (``eval``: its evaluation rows), logging nothing."""
    task = AgentTask(ROWS, byte_tokenizer(), two_turns, eval=eval, reward_funcs=[odd_length])
    return Trainer(tiny(*overrides), task=task, logger=False)


def _records(task, sample):
    return task.env.gateway.sessions.find(sample.metadata["session"]).records


def test_a_trainer_step_through_the_gateway_trains_exactly_the_sampled_tokens(tiny):
    task = AgentTask(ROWS, byte_tokenizer(), two_turns, reward_funcs=[odd_length])
    trainer = Trainer(tiny(), task=task, logger=False)
    try:
        first, second = trainer.step_once(), trainer.step_once()
    finally:
        trainer.close()
    for result in (first, second):
        assert len(result.samples) == 8 and result.metrics["gen/calls"] >= 1  # one continuous-batching session may serve both turns
        assert result.metrics["mismatch/max_abs"] < 1e-4  # sampled at the trainer's temperature, not 0.3
        for s in result.samples:
            validate_sample(s)
            records = _records(task, s)
            assert len(records) == 2 and s.metadata["dropped_chains"] == 0
            sampled = [t for r in records for t in r.choices[0].token_ids]
            assert [t for t, m in zip(s.completion_ids, s.loss_mask) if m] == sampled
            assert [lp for lp, m in zip(s.logprobs, s.loss_mask) if m] == [lp for r in records
                                                                          for lp in r.choices[0].logprobs]
            assert s.prompt_ids == records[0].prompt_ids
            assert s.ids == records[1].prompt_ids + records[1].choices[0].token_ids
            assert [m["role"] for m in s.metadata["completion"]] == ["assistant", "user", "assistant"]
            assert s.policy_version == records[0].policy_version == records[1].policy_version
            assert s.token_versions == [s.policy_version if m else -1 for m in s.loss_mask]  # set by the env
    assert {s.policy_version for s in first.samples} == {1}
    assert {s.policy_version for s in second.samples} == {2}
    assert [s.metadata["prompt"][0]["content"] for s in first.samples[::4]] == \
        [task.prompt(i).text for i in range(2)]


def test_agent_rollouts_are_a_function_of_the_step_seed(tiny):
    """Harnesses send no seed; the gateway seeds each call from the round's seed, its session and its index
    there, so two trainers with the same seed sample the same tokens (and another seed others)."""
    def sampled(*overrides):
        trainer = _trainer(tiny, *overrides)
        try:
            return [s.completion_ids for s in trainer.step_once().samples]
        finally:
            trainer.close()

    first = sampled()
    assert sampled() == first
    assert sampled("seed=1") != first
    assert len({tuple(ids) for ids in first}) > 1  # the runs of one step are seeded apart


def test_evaluating_between_steps_changes_nothing_an_agent_run_trains(tiny):
    """The environment numbers every round it runs, evaluations included (session ids ``run-ROUND-I``), but a
    call's seed comes from the round's seed and the row, so a run evaluated (sampled) before every step
    samples and learns exactly what a run never evaluated does: a config may change ``eval.every`` (or a
    sampler profile before a step) without changing the trained policy. With seeds drawn from the round
    numbers every step after the first evaluation sampled other tokens. (Their log-probs may differ in the last
    bits: which rows share a batch, and which cached prefix a call finds, depend on when the harness's calls
    arrive; served alone they are equal to the bit: the next test.)"""
    spec = ("eval.num_prompts=2", "eval.samples=2", "eval.temperature=1.0")
    plain, evaluated = _trainer(tiny, *spec, eval=ROWS[:2]), _trainer(tiny, *spec, eval=ROWS[:2])
    try:
        for _ in range(3):
            evaluated.evaluate()
            want, got = plain.step_once(), evaluated.step_once()
            assert [s.completion_ids for s in got.samples] == [s.completion_ids for s in want.samples]
            assert got.metrics["reward/raw"] == want.metrics["reward/raw"]
            assert got.samples[0].metadata["session"] != want.samples[0].metadata["session"]  # rounds apart
        trained = plain.state.side.policy.state_dict()
        for name, value in evaluated.state.side.policy.state_dict().items():
            assert torch.equal(value, trained[name]), name
    finally:
        plain.close()
        evaluated.close()


def test_served_alone_an_evaluated_run_samples_the_unevaluated_runs_log_probs_to_the_bit(tiny):
    """``GatewayConfig(max_batch=1, prefix_cache=False)`` (``task.KIND.gateway_max_batch=1
    task.KIND.gateway_prefix_cache=false``): every call computed alone and prefilled whole, so nothing a row
    gets depends on what else runs at the time; batched or cached, the log-probs of these runs differed in
    their last bits in 4-12 of 24 rows over three steps (three tries each)."""
    def trainer():
        task = AgentTask(ROWS, byte_tokenizer(), two_turns, eval=ROWS[:2], reward_funcs=[odd_length],
                         gateway=GatewayConfig(model_name="policy", max_batch=1, prefix_cache=False))
        return Trainer(tiny("eval.num_prompts=2", "eval.samples=2", "eval.temperature=1.0"), task=task, logger=False)

    plain, evaluated = trainer(), trainer()
    try:
        for _ in range(3):
            evaluated.evaluate()
            want, got = plain.step_once(), evaluated.step_once()
            assert [s.logprobs for s in got.samples] == [s.logprobs for s in want.samples]
            assert [s.completion_ids for s in got.samples] == [s.completion_ids for s in want.samples]
    finally:
        plain.close()
        evaluated.close()


def test_a_resumed_agent_run_samples_what_the_uninterrupted_run_samples(tiny, tmp_path):
    """A resumed run's environment numbers its rounds from 1 again (the counter is not in the checkpoint), so
    with seeds drawn from the round numbers its first step after the checkpoint sampled other tokens than
    the run that went on; with seeds from the round's seed and the row it samples the same."""
    straight = _trainer(tiny)
    try:
        straight.step_once()
        want = straight.step_once()
    finally:
        straight.close()
    first = _trainer(tiny)
    try:
        first.step_once()
        path = first.save(str(tmp_path / "ckpt"))
    finally:
        first.close()
    resumed = _trainer(tiny, f"checkpoint.resume_from={path}")
    try:
        got = resumed.step_once()
    finally:
        resumed.close()
    assert got.step == want.step == 2
    assert [s.completion_ids for s in got.samples] == [s.completion_ids for s in want.samples]
    assert got.samples[0].metadata["session"] != want.samples[0].metadata["session"]  # numbered from 1 again


def test_a_weight_sync_waits_for_the_running_engine_call(tiny):
    task = AgentTask(ROWS, byte_tokenizer(), two_turns, reward_funcs=[odd_length])
    trainer = Trainer(tiny(), task=task, logger=False)
    rollout = trainer.state.rollout
    try:
        task.env.serve(rollout.client)  # what the first round does with the client it is handed
        assert task.env.gateway.scheduler.lock is rollout.lock
        before = rollout.engine.policy_version
        with rollout.lock:  # what the gateway's scheduler holds for an engine call
            sync = threading.Thread(target=rollout.sync, args=(trainer.state.side.policy,))
            sync.start()
            sync.join(timeout=0.3)
            assert sync.is_alive() and rollout.engine.policy_version == before
        sync.join(timeout=10)
        assert rollout.engine.policy_version == before + 1
    finally:
        trainer.close()


def test_the_agent_task_runs_a_shell_command_from_a_config(tiny, tmp_path):
    rows = tmp_path / "tasks.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    command = f"{sys.executable} {HARNESS} {{task}}"
    trainer = Trainer(tiny("task.name=agent", f"task.path={rows}", f"task.command={json.dumps(command)}",
                           "rollout.prompts_per_step=1", "rollout.group_size=2"), logger=False)
    try:
        result = trainer.step_once()
    finally:
        trainer.close()
    assert len(result.samples) == 2
    for s in result.samples:
        records = trainer.state.task.env.gateway.sessions.find(s.metadata["session"]).records
        assert len(records) == 2
        # the harness prints the reply and the command's stdout comes back as written (no newline
        # translation), so this holds whatever bytes the random policy sampled (a \r once failed it)
        assert s.metadata["columns"]["harness_output"] == (records[1].choices[0].message["content"] or "").strip()
        assert [t for t, m in zip(s.completion_ids, s.loss_mask) if m] == \
            [t for r in records for t in r.choices[0].token_ids]


@pytest.mark.parametrize("alone", [False, True])
def test_the_gateway_settings_of_a_config_reach_the_gateway_that_serves_the_runs(tiny, tmp_path, alone):
    """``task.agent.gateway_max_batch=1 task.agent.gateway_prefix_cache=false``: every call computed alone and
    prefilled whole (the rows of a group run at once, so batched they would share the engine; a second turn
    would reuse the first's KV states); the packaged defaults reuse the first turn's prefix."""
    rows = tmp_path / "tasks.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    command = f"{sys.executable} {HARNESS} {{task}}"
    knobs = ("task.agent.gateway_max_batch=1", "task.agent.gateway_prefix_cache=false") if alone else ()
    trainer = Trainer(tiny("task.name=agent", f"task.path={rows}", f"task.agent.command={json.dumps(command)}",
                           "rollout.prompts_per_step=1", "rollout.group_size=4", *knobs), logger=False)
    try:
        result = trainer.step_once()
        gateway = trainer.state.task.env.gateway
        records = [r for s in result.samples for r in gateway.sessions.find(s.metadata["session"]).records]
    finally:
        trainer.close()
    assert (gateway.config.max_batch, gateway.config.prefix_cache) == ((1, False) if alone else (64, True))
    assert gateway.scheduler.max_batch == gateway.config.max_batch
    assert len(records) == 8  # 4 runs x 2 turns
    hits = [r.prefix_cache["hit_tokens"] for r in records]
    if alone:
        assert {r.timing["batch_rows"] for r in records} == {1}
        assert hits == [0] * 8
    else:
        assert all(hits[1::2])  # each run's second turn starts with its first turn's prompt


@pytest.mark.parametrize("printed", ["a\rb", "a\r\nb", "\x15\ufffd\rT5\\", "tab\there", "é\x7fz\x1b"])
def test_a_command_harness_returns_its_stdout_as_written(printed, tmp_path):
    script = tmp_path / "say.py"
    script.write_text("import sys\nsys.stdout.buffer.write(sys.argv[1].encode('utf-8', 'surrogatepass'))\n")
    harness = command_harness(f"{sys.executable} {script} {{task}}")
    assert harness(HarnessRun("http://127.0.0.1:1/v1", "k", "policy", printed)) == printed.strip()


def test_failed_runs_become_empty_samples_and_a_broken_harness_stops_the_step(tiny):
    def flaky(run: HarnessRun) -> str:
        if run.task == "Say no.":
            raise RuntimeError("tool crashed")
        return two_turns(run)

    task = AgentTask(ROWS, byte_tokenizer(), flaky, reward_funcs=[odd_length])
    trainer = Trainer(tiny("rollout.group_size=2"), task=task, logger=False)
    try:
        with pytest.warns(UserWarning, match="2 of 4 harness runs failed; first: RuntimeError: tool crashed"):
            result = trainer.step_once()
        failed = [s for s in result.samples if "harness_error" in s.metadata]
        assert len(failed) == 2 and all(s.completion_ids == [] and s.advantage == 0.0 for s in failed)
    finally:
        trainer.close()
    broken = AgentTask(ROWS, byte_tokenizer(), "exit 3 {task}")
    trainer = Trainer(tiny(), task=broken, logger=False)
    try:
        with pytest.raises(HarnessError, match="every harness run of this round failed; first: .*exit code 3"):
            trainer.step_once()
    finally:
        trainer.close()


def test_bad_agent_settings_name_what_to_set(tiny, tmp_path):
    with pytest.raises(ConfigError, match="task.name=agent needs task.agent.command"):
        tiny("task.name=agent", f"task.path={tmp_path / 'x.jsonl'}")
    with pytest.raises(ConfigError, match="has no \\{task\\}"):
        command_harness("my-agent --url {base_url}")
    with pytest.raises(ConfigError, match="unknown placeholder 'url'"):
        command_harness("my-agent {url} {task}")(HarnessRun("http://x/v1", "k", "policy", "t"))


class NoSessions:
    """A backend without step-wise sessions (as vLLM's): the trajkit engine's backend with ``session`` and its
    own prefix cache not declared, reusing prefixes not at all."""

    def __init__(self, backend):
        self.inner, self.name = backend, "no-sessions"
        self.capabilities = dataclasses.replace(backend.capabilities, sessions=False, prefix_cache=False)
        self.guarantees = dataclasses.replace(backend.guarantees, prefix_reuse="none")

    def __getattr__(self, name):
        if name in ("session", "set_prefix_cache", "prefix_cache"):
            raise AttributeError(name)
        return getattr(self.inner, name)


def _step_on(tiny, wrap):
    """One agent step with the rollout's client rebuilt over ``wrap(backend)`` (the same lock and counters)."""
    task = AgentTask(ROWS, byte_tokenizer(), two_turns, reward_funcs=[odd_length])
    trainer = Trainer(tiny(), task=task, logger=False)
    rollout = trainer.state.rollout
    rollout.client = CountingClient(wrap(rollout.backend), rollout.lock)
    try:
        return task, trainer.step_once()
    finally:
        trainer.close()


def test_the_gateway_serves_a_backend_without_sessions_with_the_same_samples(tiny):
    """No sessions: the gateway batches whole generate calls and says so (``degraded``); the engine's rows are
    seeded per row, so the samples are the very ones continuous batching gives; the round never rewrites the
    shared gateway config (its sampling is the sessions')."""
    task, plain = _step_on(tiny, lambda b: b)
    degraded_task, degraded = _step_on(tiny, NoSessions)
    assert task.env.gateway.degraded == [] and task.env.gateway.scheduler.continuous
    assert not degraded_task.env.gateway.scheduler.continuous
    assert [n.split(":")[0] for n in degraded_task.env.gateway.degraded] == \
        ["continuous batching off", "trajkit's exact prefix cache off"]
    assert [s.completion_ids for s in degraded.samples] == [s.completion_ids for s in plain.samples]
    assert max(abs(a - b) for d, p in zip(degraded.samples, plain.samples)
               for a, b in zip(d.logprobs, p.logprobs)) < 1e-5  # other batch shapes: float rounding only
    assert degraded.metrics["gen/calls"] >= 2 and degraded.metrics["gen/tokens"] == plain.metrics["gen/tokens"]
    for t in (task, degraded_task):
        assert t.env.config.force_temperature is None and t.env.config.force_seed is None
        session = t.env.gateway.sessions.find(plain.samples[0].metadata["session"])
        assert session.forced.temperature == 1.0 and session.forced.max_tokens == 6


class DeadSessions(NoSessions):
    """A backend on which the gateway's scheduler thread dies as it opens its batch: the error the vLLM path
    once raised there (an AttributeError on None, the rollout's missing engine), outside any engine call."""

    def __init__(self, backend):
        super().__init__(backend)
        self.capabilities = dataclasses.replace(self.capabilities, sessions=True)

    def __getattr__(self, name):
        if name == "session":
            return lambda: None.session()
        return super().__getattr__(name)


def test_a_dying_gateway_thread_fails_the_step_with_its_traceback_and_the_task_named(tiny):
    task = AgentTask(ROWS, byte_tokenizer(), two_turns, reward_funcs=[odd_length], timeout_s=60)
    trainer = Trainer(tiny(), task=task, logger=False)
    rollout = trainer.state.rollout
    rollout.client = CountingClient(DeadSessions(rollout.backend), rollout.lock)
    try:
        with pytest.raises(EnvironmentDied) as info:
            trainer.step_once()
    finally:
        trainer.close()
    message = str(info.value)
    assert message.startswith("task agent: the gateway's scheduler thread died")
    assert "Traceback" in message and "AttributeError: 'NoneType' object has no attribute 'session'" in message
    assert not task.env.gateway.scheduler.alive()


class Holding(NoSessions):
    """Whole generate calls; a call with a ``HOLD`` prompt says so (``entered``) and runs only once ``release``
    is set: a round's request that stays in flight as long as the test wants."""

    def __init__(self, backend, hold: list[int]):
        super().__init__(backend)
        self.hold, self.entered, self.release = hold, threading.Event(), threading.Event()

    def generate(self, prompt_ids, params=None):
        n = len(self.hold)
        if any(p[i:i + n] == self.hold for p in prompt_ids for i in range(len(p))):
            self.entered.set()
            assert self.release.wait(60), "the test never released the held call"
        return self.inner.generate(prompt_ids, params)


def test_two_rounds_at_once_share_the_gateway_and_each_waits_for_its_own_requests(tiny):
    """Two rounds from two threads, each through its own client with a reserved round number: one gateway
    serves both; round 7 ends while round 8's request is still in the engine (a round waits for its own
    sessions' requests, not the whole scheduler); each client counts exactly its own round's calls."""
    from trajkit.rl.step import rollout_params
    from trajkit.envs.base import Prompt

    tok = byte_tokenizer()
    called, mutex = [], threading.Lock()
    backend = {}

    def harness(run: HarnessRun) -> str:
        if run.task == "HOLD":  # round 8: after round 7's calls, a call the engine holds
            wait_for(lambda: len(called) == 2)
        reply = openai.OpenAI(base_url=run.base_url, api_key=run.api_key, max_retries=0).chat.completions.create(
            model=run.model, messages=[{"role": "user", "content": run.task}])
        with mutex:
            called.append(run.api_key)
        if run.task != "HOLD":  # round 7: returns once round 8's call is in the engine
            wait_for(backend["held"].entered.is_set)
        return reply.choices[0].message.content or ""

    task = AgentTask(ROWS, tok, harness, reward_funcs=[odd_length], timeout_s=60)
    trainer = Trainer(tiny(), task=task, logger=False)
    rollout = trainer.state.rollout
    held = backend["held"] = Holding(rollout.backend, tok.encode("HOLD"))
    clients = {r: CountingClient(held, rollout.lock, round=r) for r in (7, 8)}
    params = rollout_params(trainer.cfg, 5, (tok.eos_token_id,))
    prompts = {7: [Prompt(t, tok.encode(t), i) for i, t in enumerate(["Say yes.", "Say no."])],
               8: [Prompt("HOLD", tok.encode("HOLD"), 0)]}
    got = {}

    def round_of(r):
        got[r] = task.env.rollout(clients[r], prompts[r], params)
    threads = {r: threading.Thread(target=round_of, args=(r,)) for r in (7, 8)}
    try:
        for t in threads.values():
            t.start()
        threads[7].join(timeout=60)
        ended_first = not threads[7].is_alive() and not held.release.is_set()
        held.release.set()
        threads[8].join(timeout=60)
        gateway = task.env.gateway
    finally:
        held.release.set()
        trainer.close()
    assert ended_first  # round 7 returned while round 8's request was held in the engine
    assert [s.metadata["session"] for s in got[7]] == ["run-7-0", "run-7-1"]
    assert [s.metadata["session"] for s in got[8]] == ["run-8-0"]
    assert clients[7].round is None and clients[8].round is None  # a reserved number is used once
    for r, samples in got.items():
        records = [rec for s in samples for rec in gateway.sessions.find(s.metadata["session"]).records]
        assert len(records) == len(samples)  # one call per run, all of this round's on the one gateway
        tokens = sum(len(rec.choices[0].token_ids) for rec in records)
        assert sum(c.new_tokens for c in clients[r].calls) == tokens  # its own calls, not the other round's
        assert len(clients[r].versions) == len(clients[r].calls)


def test_a_served_backend_counts_each_engine_call_in_the_rounds_it_serves():
    """The gateway's engine (:class:`~trajkit.envs.client.ServedBackend`) against hand-counted calls: a whole
    call counts in every routed client with a row in it (whole in each when two rounds share it), rows of no
    routed round in every routed client, and in the client it was made from when none is routed; a
    step-wise session once per client, by reference, when a row of its round joins."""
    from types import SimpleNamespace

    from trajkit.engine.types import Completion, Completions, GenerationStats
    from trajkit.backends.base import Capabilities, Guarantees
    from trajkit.envs.client import ServedBackend

    class Fake:  # a backend whose call of n rows counts n new tokens
        policy_version, name, num_params, engine, vocab_size = 3, "fake", 0, None, 8
        guarantees = Guarantees(exact_logprobs=False, deterministic=True, logprob_atol=0.0)
        capabilities, context_window, generation_config = Capabilities(sessions=True), None, None

        def generate(self, prompt_ids, params=None):
            return Completions([Completion([1], [0.0], "length") for _ in prompt_ids],
                               GenerationStats(new_tokens=len(prompt_ids)), self.policy_version)

        def session(self):
            return SimpleNamespace(stats=GenerationStats())

    made, a, b = (CountingClient(Fake()) for _ in range(3))
    served = ServedBackend(made)
    served.serves([None])
    served.generate([[5]])  # nothing routed: the client it was made from
    served.route(1, a)
    served.route(2, b)
    for tags, rows in (([1], 2), ([1, 2], 3), ([2, 2], 4), ([None], 5), ([9], 6)):
        served.serves(tags)
        served.generate([[5]] * rows)
    served.unroute(2)
    served.serves([2])  # round 2 ended: its late rows count in the rounds still routed
    served.generate([[5]] * 7)
    assert [s.new_tokens for s in made.calls] == [1]
    assert [s.new_tokens for s in a.calls] == [2, 3, 5, 6, 7]
    assert [s.new_tokens for s in b.calls] == [3, 4, 5, 6]
    assert a.versions == [3] * 5 and b.versions == [3] * 4

    a.calls.clear(), b.calls.clear()
    served.route(2, b)
    session = served.session()  # opened by the scheduler when rows wait: counted as rows of a round join
    assert a.calls == [] and b.calls == []
    served.serves([1])
    served.serves([1, 2])
    served.serves([2])
    assert a.calls == [session.stats] and b.calls == [session.stats]
    assert a.calls[0] is session.stats  # by reference: its counters grow as it steps
    served.session()
    served.serves([2])
    assert len(a.calls) == 1 and len(b.calls) == 2  # a new session counts anew
