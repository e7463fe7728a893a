"""Asynchronous rollouts (``rollout.mode=async``): staleness 0 is the synchronous trainer bit for bit; with a
scripted interleaving of the producer and the trainer, the bound holds, episodes continue across a weight
push with each token's version recorded, and every prompt is trained once, in order."""
import threading

import pytest
import torch

from trajkit.errors import ConfigError
from trajkit.rl.config import load_config
from trajkit.envs.registry import make_task
from trajkit.envs.sample import validate_sample
from trajkit.rl.trainer import Trainer

from .conftest import TINY

SIGNAL = ("shaping.overlong_buffer=3", "loss.name=dapo")  # length shaping: groups with reward spread


def _run(cfg, steps):
    t = Trainer(cfg, logger=False)
    try:
        return t, [t.step_once() for _ in range(steps)]
    finally:
        t.close()


def test_staleness_zero_equals_sync_bitwise(tiny):
    """Evaluation after every step too: it pushes the weights and samples beside the producer's thread."""
    sync, expected = _run(tiny(*SIGNAL, "eval.every=1", "eval.num_prompts=4"), 3)
    initial = Trainer(tiny(*SIGNAL), logger=False).state.side.policy.state_dict()
    asyn, got = _run(tiny(*SIGNAL, "eval.every=1", "eval.num_prompts=4", "rollout.mode=async",
                          "rollout.max_staleness=0"), 3)
    for a, b in zip(expected, got):
        assert a.metrics["eval/reward"] == b.metrics["eval/reward"]
        assert [s.completion_ids for s in a.samples] == [s.completion_ids for s in b.samples]
        assert [s.logprobs for s in a.samples] == [s.logprobs for s in b.samples]
        for key in ("reward/shaped", "loss/pg", "loss/grad_norm", "mismatch/mean_abs"):
            assert a.metrics[key] == b.metrics[key], key
        assert b.metrics["async/staleness_max"] == 0 and b.metrics["async/dropped_stale"] == 0
    assert any(b.metrics["loss/grad_norm"] > 0 for b in got)
    moved = False
    for name, p in sync.state.side.policy.state_dict().items():
        assert torch.equal(p, asyn.state.side.policy.state_dict()[name]), name
        moved |= not torch.equal(p, initial[name])
    assert moved  # the equality is of trained weights, not of two untouched copies


def hold_updates(trainer, steps: int, next_made) -> None:
    """A scripted interleaving: update ``s`` starts only once ``next_made(s + 1)`` says batch ``s + 1`` is
    made (far enough along for the test), which K >= 1 admits at version ``s``: every batch after the first
    is exactly one version stale."""
    learner = trainer.state.learner
    real_update = learner.update

    def held_update(step):
        if step + 1 < steps:
            wait_for(lambda: next_made(step + 1))
        return real_update(step)
    learner.update = held_update


def hold_updates_until_the_next_batch_is_made(trainer, steps: int) -> None:
    """:func:`hold_updates` until the producer has handed batch ``s + 1`` over (or failed)."""
    hold_updates(trainer, steps, lambda s: s in trainer.producer.ready or trainer.producer.error is not None)


def test_staleness_one_trains_on_older_weights(tiny):
    """Guards the test above: with K=1 the producer runs ahead, so batches 1 and 2 are sampled by weights
    one update old, and their log-probs differ from the synchronous run's."""
    _, expected = _run(tiny(*SIGNAL), 3)
    t = Trainer(tiny(*SIGNAL, "rollout.mode=async", "rollout.max_staleness=1"), logger=False)
    hold_updates_until_the_next_batch_is_made(t, 3)
    try:
        got = [t.step_once() for _ in range(3)]
    finally:
        t.close()
    assert [s.metrics["async/staleness_max"] for s in got] == [0, 1, 1]
    assert [s.completion_ids for s in expected[0].samples] == [s.completion_ids for s in got[0].samples]
    for a, b in zip(expected[1:], got[1:]):  # the engine's log-probs: other weights, other numbers
        assert [s.logprobs for s in a.samples] != [s.logprobs for s in b.samples]


class TwoCallTask:
    """The copy task whose episodes make two engine calls: the second continues the first's tokens. A
    scripted interleaving (the fake clock): batch ``s >= 1`` makes its first call while the trainer is held
    before update ``s - 1`` and its second only after the push of update ``s - 1``, so it spans exactly two
    versions; ``calls[s]`` records the trainer version each call saw."""

    def __init__(self, inner, rollout_of, seed: int, steps: int):
        self.inner, self.rollout_of, self.seed = inner, rollout_of, seed
        self.name, self.reward_funcs, self.env = "two_call", inner.reward_funcs, self
        self.first_call = [threading.Event() for _ in range(steps + 4)]
        self.calls: dict[int, list[int]] = {}

    def prompt(self, index, split="train"):
        return self.inner.prompt(index, split)

    def rollout(self, generate, prompts, params):
        rollout = self.rollout_of()
        batch = params.seed - self.seed * 1_000_003  # the step's seed (trajkit.rl.step.step_seed)
        seen = []

        def recorded(ids, p):
            out = generate(ids, p)
            seen.append(out.policy_version)
            return out
        samples = self.inner.env.rollout(recorded, prompts, params)
        if not 0 <= batch < len(self.first_call):  # not a training batch (evaluation)
            return samples
        first = rollout.trained_steps(seen[0])
        self.first_call[batch].set()
        if batch >= 1:
            wait_for(lambda: rollout.trained_steps(rollout.backend.policy_version) >= batch)
        outs = generate([s.ids for s in samples], params)
        second = rollout.trained_steps(outs.policy_version)
        self.calls[batch] = [first, second]
        for s, out in zip(samples, outs):
            s.token_versions = [seen[0]] * len(s.completion_ids) + [outs.policy_version] * len(out.token_ids)
            s.completion_ids += list(out.token_ids)
            s.logprobs += list(out.logprobs)
            s.loss_mask += [1] * len(out.token_ids)
        return samples


def wait_for(predicate, timeout_s: float = 60.0) -> None:
    """Poll ``predicate`` (a deadlock guard: the test fails instead of hanging)."""
    event = threading.Event()
    for _ in range(int(timeout_s / 0.002)):
        if predicate():
            return
        event.wait(0.002)
    raise AssertionError("the scripted interleaving did not happen")


def test_bound_partial_rollouts_and_every_prompt_once(tiny):
    steps, k = 5, 1
    cfg = tiny(*SIGNAL, "rollout.mode=async", f"rollout.max_staleness={k}", "rollout.max_new_tokens=3")
    holder = {}
    from trajkit.rl.build import build_tokenizer
    inner = make_task(cfg.task, cfg.seed, build_tokenizer(cfg))
    task = TwoCallTask(inner, lambda: holder["t"].state.rollout, cfg.seed, steps)
    trainer = Trainer(cfg, task=task, logger=False)
    holder["t"] = trainer
    hold_updates(trainer, steps, lambda s: task.first_call[s].is_set())  # batch s made its first call
    try:
        results = [trainer.step_once() for _ in range(steps)]
    finally:
        trainer.close()
    p, g = cfg.rollout.prompts_per_step, cfg.rollout.group_size
    for s, result in enumerate(results):
        assert task.calls[s] == ([0, 0] if s == 0 else [s - 1, s])  # the episode continued under new weights
        expected = [inner.prompt(i).ids for i in range(s * p, (s + 1) * p) for _ in range(g)]
        assert [x.prompt_ids for x in result.samples] == expected  # each prompt once, in stream order
        for i, x in enumerate(result.samples):
            validate_sample(x, i)
            born, last = (trainer.state.rollout.trained_steps(v) for v in x.version_span)
            assert s - born <= k and (born, last) == tuple(task.calls[s])
        m = result.metrics
        assert m["async/staleness_max"] == (0 if s == 0 else 1) <= k
        assert m["async/version_span_max"] == (0 if s == 0 else 1)
        assert m["async/version_span_tokens"] == (0 if s == 0 else sum(
            sum(1 for v in x.token_versions if v != x.token_versions[0]) for x in result.samples))
        assert m["async/dropped_stale"] == 0


def test_async_config_is_checked(tiny):
    with pytest.raises(ConfigError, match="max_staleness"):
        tiny("rollout.mode=async", "rollout.max_staleness=-1")
    with pytest.raises(ConfigError, match="mode"):
        load_config(None, TINY + ["rollout.mode=fast"])
    with pytest.raises(ConfigError, match="torchrun"):
        tiny("rollout.mode=async", "policy.fsdp=true")


class HeldEpisodesTask:
    """The copy task on a scripted clock: batch ``s``'s episodes, after their engine call, wait (outside
    the engine's lock, as a tool call or a sandbox does) until batch ``s + K`` has sampled its tokens, so a
    batch can finish only if the producer starts batches while earlier ones are still running (and batch
    ``s + K`` samples with weights no newer than step ``s``'s: marking it at its start instead let a loaded
    machine push step ``s``'s update before its engine call, a staleness of ``K - 1``); ``events`` records
    every batch's start and end, ``running`` how many batches were inside ``rollout`` at once."""

    concurrent_rollouts = True

    def __init__(self, inner, seed: int, k: int, steps: int):
        self.inner, self.seed, self.k = inner, seed, k
        self.name, self.reward_funcs, self.env = "held", inner.reward_funcs, self
        self.started = [threading.Event() for _ in range(steps + 2 * k + 4)]
        self.release = threading.Event()  # the end of the script: no batch waits any more
        self.events: list[tuple[str, int]] = []
        self.running, self.most_running = 0, 0
        self.mutex = threading.Lock()

    def prompt(self, index, split="train"):
        return self.inner.prompt(index, split)

    def rollout(self, generate, prompts, params):
        batch = params.seed - self.seed * 1_000_003  # the step's seed (trajkit.rl.step.step_seed)
        if not 0 <= batch < len(self.started):  # not a training batch (evaluation)
            return self.inner.env.rollout(generate, prompts, params)
        with self.mutex:
            self.events.append(("start", batch))
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        samples = self.inner.env.rollout(generate, prompts, params)
        self.started[batch].set()  # after its tokens: sampled before any batch it holds back can train
        wait_for(lambda: self.release.is_set() or self.started[batch + self.k].is_set())
        with self.mutex:
            self.events.append(("end", batch))
            self.running -= 1
        return samples


@pytest.mark.parametrize("k", [1, 2])
def test_batches_overlap_with_the_bound_held_exactly(tiny, k):
    """K + 1 batches in flight: batch ``s`` cannot end before batch ``s + K`` starts (the script above; a
    producer that made one batch at a time would never finish batch 0 and the test would fail on its
    deadlock guard). Batch ``s + K`` then starts at version ``s`` exactly: staleness ``min(s, K)``, never
    more; at most K + 1 batches generate at once; every prompt trained once, in stream order."""
    steps = 5
    cfg = tiny(*SIGNAL, "rollout.mode=async", f"rollout.max_staleness={k}", "rollout.max_new_tokens=3")
    from trajkit.rl.build import build_tokenizer
    inner = make_task(cfg.task, cfg.seed, build_tokenizer(cfg))
    task = HeldEpisodesTask(inner, cfg.seed, k, steps)
    trainer = Trainer(cfg, task=task, logger=False)
    try:
        results = [trainer.step_once() for _ in range(steps)]
        most_in_flight = trainer.producer.most_in_flight
    finally:
        task.release.set()
        trainer.close()
    order = task.events.index
    for s in range(steps):
        assert order(("start", s + k)) < order(("end", s))  # batch s + K started while batch s ran
    assert task.most_running == most_in_flight == k + 1
    p, g = cfg.rollout.prompts_per_step, cfg.rollout.group_size
    for s, result in enumerate(results):
        m = result.metrics
        assert m["async/started_version"] == max(0, s - k)
        assert m["async/staleness_max"] == min(s, k) and m["async/dropped_stale"] == 0
        expected = [inner.prompt(i).ids for i in range(s * p, (s + 1) * p) for _ in range(g)]
        assert [x.prompt_ids for x in result.samples] == expected  # each prompt once, in stream order
        assert m["gen/calls"] == 1  # the batch's own counters: not another batch's call


def test_one_batch_at_a_time_where_overlapping_is_unsafe(tiny):
    """K + 1 batches in flight for an environment that declares ``concurrent_rollouts``; one at a time
    with dynamic sampling (its refills draw from the stream mid-batch) and for an environment that does
    not declare it, still within the bound (the gateway environments declare it: test_async_gateway.py)."""
    from trajkit.rl.producer import batches_in_flight

    t = Trainer(tiny("rollout.mode=async", "rollout.max_staleness=2"), logger=False)
    try:
        assert batches_in_flight(t.state) == 3
        t.state.task.env = type("Plain", (), {"rollout": t.state.task.env.rollout})()  # no declaration
        assert batches_in_flight(t.state) == 1
    finally:
        t.close()
    cfg = tiny(*SIGNAL, "rollout.mode=async", "rollout.max_staleness=2", "rollout.dynamic_sampling=true")
    t = Trainer(cfg, logger=False)
    try:
        assert batches_in_flight(t.state) == 1
        got = [t.step_once().metrics for _ in range(3)]
    finally:
        t.close()
    assert all(m["async/in_flight_max"] == 1 and m["async/staleness_max"] <= 2 for m in got)


class FailingBatchTask(HeldEpisodesTask):
    """Batch 1's episodes raise (a broken tool or verifier) while batch 0's run beside them."""

    def rollout(self, generate, prompts, params):
        if params.seed - self.seed * 1_000_003 == 1:
            raise RuntimeError("verifier crashed")
        return self.inner.env.rollout(generate, prompts, params)


def test_a_failing_batch_fails_its_own_step_with_the_batch_named(tiny):
    from trajkit.rl.build import build_tokenizer
    from trajkit.rl.producer import ProducerError

    cfg = tiny("rollout.mode=async", "rollout.max_staleness=1")
    task = FailingBatchTask(make_task(cfg.task, cfg.seed, build_tokenizer(cfg)), cfg.seed, 1, 2)
    trainer = Trainer(cfg, task=task, logger=False)
    try:
        first = trainer.step_once()  # batch 0 is handed over though batch 1 failed beside it (or not yet)
        with pytest.raises(ProducerError, match="generating batch 1: verifier crashed") as err:
            trainer.step_once()
        assert isinstance(err.value.__cause__, RuntimeError)
    finally:
        trainer.close()
    assert first.step == 1 and len(first.samples) == cfg.rollout.prompts_per_step * cfg.rollout.group_size
