"""Asynchronous rollouts through the gateway (an agent task, :class:`trajkit.envs.agent.GatewayEnv`): staleness 0
is the synchronous trainer bit for bit, session ids included; with K=1 and a harness on a scripted clock,
batch ``s + 1``'s episodes start while batch ``s``'s still run, on the one gateway, with the bound held, every
prompt trained once, round numbers (session ids) that follow the steps, and each batch's ``gen/*`` counters
its own."""
import threading

import openai
import torch

from tests.envs.test_agent import ROWS, odd_length, two_turns
from trajkit.envs.agent import AgentTask, HarnessRun
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.rl.trainer import Trainer

from .test_async import SIGNAL, hold_updates, wait_for


def _agent_run(cfg, task, steps):
    trainer = Trainer(cfg, task=task, logger=False)
    try:
        return trainer, [trainer.step_once() for _ in range(steps)]
    finally:
        trainer.close()


class InOrder:
    """``two_turns``, one run at a time in row order (run ``i`` of a round starts when run ``i - 1`` ended): the
    engine's batches, and so their float rounding, do not depend on the threads' timing."""

    def __init__(self):
        self.ended: dict[tuple[str, int], threading.Event] = {}
        self.mutex = threading.Lock()

    def _ended(self, round_no: str, i: int) -> threading.Event:
        with self.mutex:
            return self.ended.setdefault((round_no, i), threading.Event())

    def __call__(self, run: HarnessRun) -> str:
        _, round_no, i = run.session.split("-")
        if int(i):
            assert self._ended(round_no, int(i) - 1).wait(60), "the scripted order did not happen"
        try:
            return two_turns(run)
        finally:
            self._ended(round_no, int(i)).set()


def test_staleness_zero_equals_sync_bitwise_through_the_gateway(tiny):
    """K=0 through the gateway: the same rounds (session ids ``run-STEP+1-I``), tokens, log-probs, losses and
    trained weights as the synchronous trainer."""
    def run(*overrides):
        task = AgentTask(ROWS, byte_tokenizer(), InOrder(), reward_funcs=[odd_length])
        return _agent_run(tiny(*SIGNAL, *overrides), task, 3)
    sync, expected = run()
    asyn, got = run("rollout.mode=async", "rollout.max_staleness=0")
    for step, (a, b) in enumerate(zip(expected, got)):
        assert [s.metadata["session"] for s in a.samples] == [s.metadata["session"] for s in b.samples] == \
            [f"run-{step + 1}-{i}" for i in range(8)]
        assert [s.completion_ids for s in a.samples] == [s.completion_ids for s in b.samples]
        assert [s.logprobs for s in a.samples] == [s.logprobs for s in b.samples]
        for key in ("reward/shaped", "loss/pg", "loss/grad_norm", "mismatch/mean_abs", "gen/tokens"):
            assert a.metrics[key] == b.metrics[key], key
        assert b.metrics["async/staleness_max"] == 0 and b.metrics["async/dropped_stale"] == 0
    assert any(b.metrics["loss/grad_norm"] > 0 for b in got)
    for name, p in sync.state.side.policy.state_dict().items():
        assert torch.equal(p, asyn.state.side.policy.state_dict()[name]), name


class HeldHarness:
    """A harness on a scripted clock. A run of batch ``b`` (session ``run-ROUND-I``; round ``b + 1`` when the
    rounds follow the steps) starts, waits until every run of batch ``b - 1`` has made its call (so no engine
    call serves two batches, and each batch's counters are exactly its own calls), makes one chat call, then
    waits until batch ``b + K`` has started: a batch can end only if the producer starts later batches while
    it runs. ``events`` records every run's start and end."""

    def __init__(self, k: int, runs: int, batches: int):
        self.k, self.runs = k, runs
        self.started = [threading.Event() for _ in range(batches)]
        self.called = [threading.Event() for _ in range(batches)]
        self.release = threading.Event()  # the end of the script: no run waits any more
        self.calls = [0] * batches
        self.events: list[tuple[str, int]] = []
        self.mutex = threading.Lock()

    def __call__(self, run: HarnessRun) -> str:
        batch = int(run.session.split("-")[1]) - 1
        with self.mutex:
            self.events.append(("start", batch))
        self.started[batch].set()
        if batch:
            wait_for(lambda: self.release.is_set() or self.called[batch - 1].is_set())
        client = openai.OpenAI(base_url=run.base_url, api_key=run.api_key, max_retries=0)
        reply = client.chat.completions.create(model=run.model, messages=[{"role": "user", "content": run.task}])
        with self.mutex:
            self.calls[batch] += 1
            if self.calls[batch] == self.runs:
                self.called[batch].set()
        wait_for(lambda: self.release.is_set() or self.started[batch + self.k].is_set())
        with self.mutex:
            self.events.append(("end", batch))
        return reply.choices[0].message.content or ""


def test_gateway_batches_overlap_with_the_bound_held(tiny):
    steps, k = 4, 1
    cfg = tiny(*SIGNAL, "rollout.mode=async", f"rollout.max_staleness={k}", "rollout.group_size=2")
    p, g = cfg.rollout.prompts_per_step, cfg.rollout.group_size
    rows = [{"prompt": f"Say {w}.", "answer": w} for w in "one two three four five six seven eight".split()]
    harness = HeldHarness(k, p * g, steps + 2 * k + 4)
    task = AgentTask(rows, byte_tokenizer(), harness, reward_funcs=[odd_length], timeout_s=120)
    trainer = Trainer(cfg, task=task, logger=False)
    hold_updates(trainer, steps, lambda s: harness.called[s].is_set())  # batch s made its calls: one version stale
    try:
        results = [trainer.step_once() for _ in range(steps)]
        most_in_flight = trainer.producer.most_in_flight
    finally:
        harness.release.set()
        trainer.close()
    events = harness.events
    for s in range(steps):  # batch s + K's episodes started while batch s's ran
        assert events.index(("start", s + k)) < len(events) - 1 - events[::-1].index(("end", s))
    assert most_in_flight == k + 1
    gateway = task.env.gateway
    for s, result in enumerate(results):
        m = result.metrics
        assert m["async/started_version"] == max(0, s - k)
        assert m["async/staleness_max"] == min(s, k) and m["async/dropped_stale"] == 0
        assert [x.metadata["session"] for x in result.samples] == [f"run-{s + 1}-{i}" for i in range(p * g)]
        assert [x.metadata["prompt"][0]["content"] for x in result.samples[::g]] == \
            [task.prompt(i).text for i in range(s * p, (s + 1) * p)]  # each prompt once, in stream order
        records = [r for x in result.samples for r in gateway.sessions.find(x.metadata["session"]).records]
        assert len(records) == p * g
        assert m["gen/tokens"] == sum(len(r.choices[0].token_ids) for r in records)  # its own calls, no other's
        assert {trainer.state.rollout.trained_steps(x.policy_version) for x in result.samples} == {max(0, s - k)}
