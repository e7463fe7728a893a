"""DAPO dynamic sampling: exactly the constant groups are dropped and refilled from the stream, the
budget is honoured, and a resumed run with refills reproduces the next step bit for bit."""
import pytest
import torch

from trajkit.demo_agent_report import dynamic_stats
from trajkit.rl.dynamic import ROUND_STRIDE, constant_groups, round_seed
from trajkit.envs.rewards import RewardSet
from trajkit.rl.trainer import Trainer

G = 4
CONSTANT = {0, 2, 5}  # prompts whose group gets the same reward on every completion


def controlled_reward(completions, index, **kwargs):
    """1.0 for every completion of a CONSTANT prompt; otherwise 1.0 for the first of each group only."""
    return [1.0 if n in CONSTANT else float(i % G == 0) for i, n in enumerate(index)]


def with_index_column(task):
    """Give each prompt an ``index`` column (reward functions see a row's columns)."""
    make = task.prompt

    def prompt(index, split="train"):
        p = make(index, split)
        p.columns["index"] = index
        return p
    task.prompt = prompt


def _trainer(tiny, *overrides):
    t = Trainer(tiny("rollout.prompts_per_step=2", f"rollout.group_size={G}", *overrides), logger=False)
    with_index_column(t.state.task)
    t.state.rewards = RewardSet.build([controlled_reward])
    return t


def _prompt_indices(samples):
    return [s.metadata["prompt_index"] for s in samples[::G]]


def test_constant_groups():
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.25, 0.25, 0.25], [0.0, 0.0, 1e-7]])
    assert constant_groups(rewards).tolist() == [True, False, True, False]


def test_round_seeds_differ_and_round_zero_is_the_step_seed():
    assert round_seed(12345, 0) == 12345
    assert len({round_seed(s, r) for s in range(50) for r in range(5)}) == 250
    assert round_seed(7, 1) - round_seed(7, 0) == ROUND_STRIDE


def test_exactly_the_constant_groups_are_dropped_and_refilled(tiny):
    # step 0 takes prompts 0, 1: 0 is constant -> refill with 2 (constant) -> refill with 3.
    # step 1 takes 4, 5: 5 is constant -> refill with 6.
    t = _trainer(tiny, "rollout.dynamic_sampling=true", "rollout.max_refill_rounds=4")
    first = t.step_once()
    assert _prompt_indices(first.samples) == [1, 3]
    assert [s.group for s in first.samples] == [0] * G + [1] * G
    assert first.metrics["dynamic/groups_dropped"] == 2
    assert first.metrics["dynamic/refill_rounds"] == 2
    assert first.metrics["dynamic/groups_topped_up"] == 0
    assert first.metrics["dynamic/prompts_drawn"] == 4
    assert t.state.stream.cursor == 4
    assert all(s.advantage != 0.0 for s in first.samples)
    # the reward metrics cover every generated row: 4 groups, two all-1 (prompts 0, 2), two with one 1 of 4
    assert first.metrics["reward/raw"] == pytest.approx((2 * G + 2) / (4 * G))
    second = t.step_once()
    assert _prompt_indices(second.samples) == [4, 6]
    assert second.metrics["dynamic/groups_dropped"] == 1 and second.metrics["dynamic/refill_rounds"] == 1
    assert t.state.stream.cursor == 7


def test_budget_spent_tops_up_with_the_earliest_dropped_group(tiny):
    # prompts 0, 1 -> keep 1; one refill: prompt 2, constant -> budget spent -> batch [1, 0]
    t = _trainer(tiny, "rollout.dynamic_sampling=true", "rollout.max_refill_rounds=1")
    result = t.step_once()
    assert _prompt_indices(result.samples) == [1, 0]
    assert result.metrics["dynamic/groups_topped_up"] == 1
    assert result.metrics["dynamic/refill_rounds"] == 1
    assert t.state.stream.cursor == 3
    assert all(s.advantage == 0.0 for s in result.samples[G:])  # the topped-up group carries no signal


def test_the_reports_counts_are_the_trained_batches(tiny):
    # step 0: prompts 0, 1 -> keep 1; refill 2 (constant), budget spent -> [1, 0], prompt 0's group topped up.
    # step 1: 3, 4 kept.
    t = _trainer(tiny, "rollout.dynamic_sampling=true", "rollout.max_refill_rounds=1")
    results = [t.step_once() for _ in range(2)]
    got = dynamic_stats([{"step": i + 1, **r.metrics} for i, r in enumerate(results)])
    groups = [[s for s in r.samples if s.group == g] for r in results for g in sorted({s.group for s in r.samples})]
    constant = [all(s.advantage == 0.0 for s in grp) for grp in groups]
    assert len(groups) == 4 and constant == [False, True, False, False]
    assert got == {"steps": 2, "tasks_drawn": 5, "groups_dropped": 2, "groups_trained": len(groups),
                   "trained_all_same": sum(constant), "trained_all_same_share": 0.25}


def test_off_keeps_every_group_in_order(tiny):
    t = _trainer(tiny)
    result = t.step_once()
    assert _prompt_indices(result.samples) == [0, 1]
    assert t.state.stream.cursor == 2
    assert not any(k.startswith("dynamic/") for k in result.metrics)


def test_refill_rounds_sample_with_their_own_seed(tiny):
    """Prompt 3, refilled in round 2 of step 0 (rows 0..G-1 of that round), is sampled differently from
    prompt 3 as the first group of step 0's round 0 (same rows, same weights): only the seed differs."""
    t = _trainer(tiny, "rollout.dynamic_sampling=true")
    refilled = t.step_once().samples[G:]
    other = _trainer(tiny)
    other.state.stream.cursor = 3
    same_prompt_round0 = other.step_once().samples[:G]
    assert _prompt_indices(same_prompt_round0) == [3]
    assert [s.completion_ids for s in refilled] != [s.completion_ids for s in same_prompt_round0]


def test_resume_with_dynamic_sampling_is_bitwise(tiny, tmp_path):
    spec = ("rollout.dynamic_sampling=true", "rollout.max_refill_rounds=3")
    straight = _trainer(tiny, *spec)
    for _ in range(3):
        expected = straight.step_once()
    first = _trainer(tiny, *spec)
    for _ in range(2):
        first.step_once()
    path = first.save(str(tmp_path / "ckpt"))
    resumed = _trainer(tiny, *spec, f"checkpoint.resume_from={path}")
    assert resumed.state.stream.cursor == first.state.stream.cursor > 4  # refills moved the cursor
    got = resumed.step_once()
    assert _prompt_indices(got.samples) == _prompt_indices(expected.samples)
    assert [s.completion_ids for s in got.samples] == [s.completion_ids for s in expected.samples]
    for key in ("reward/raw", "loss/pg", "loss/grad_norm", "dynamic/groups_dropped", "dynamic/refill_rounds"):
        assert got.metrics[key] == expected.metrics[key], key
    assert resumed.state.stream.cursor == straight.state.stream.cursor
    for a, b in zip(straight.state.side.policy.state_dict().values(), resumed.state.side.policy.state_dict().values()):
        assert torch.equal(a, b)
