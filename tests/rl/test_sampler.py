"""The difficulty sampler's choices against hand-derived pass-rate tables: the pools, the draw weights, the
unsolved share, the fill order, the plateau re-profile, resume (exact draws) and the config refusals. A fake
task (no model) whose profile rewards come from a fixed table."""
import dataclasses
import io
import logging
import math

import pytest
import torch

from trajkit.envs.base import ENDLESS, Prompt
from trajkit.errors import ConfigError
from trajkit.rl.config import load_config
from trajkit.rl.sampler import DifficultySampler, draw_weight, pass_rates, pool_of, unsolved_quota, walk_stride
from trajkit.rl.sampler_config import SamplerConfig


class FakeTask:
    """Item ``i % distinct`` at stream index ``i``: the prompt text repeats every ``distinct`` indices."""

    def __init__(self, distinct: int):
        self.distinct = distinct

    def prompt(self, index, split="train"):
        return Prompt(f"item{index % self.distinct}", [1], index)

    def num_prompts(self, split):
        return ENDLESS


def table_profiler(table, calls=None):
    """Profile rewards from ``table[item]`` (a list of K rewards per item, the item read from the text)."""
    def run(prompts, k, number, first):
        if calls is not None:
            calls.append((len(prompts), k, number, first))
        return [r for p in prompts for r in table[int(p.text[4:])][:k]]
    return run


def sampler(distinct=6, table=None, calls=None, batch=2, group=4, **cfg):
    settings = SamplerConfig(**{"profile_samples": 4, "window": 8, "unsolved_share": 0.0, **cfg})
    return DifficultySampler(FakeTask(distinct), settings, seed=3, correct_threshold=1.0, batch=batch,
                             group_size=group, profiler=table_profiler(table, calls) if table else None)


# item: its profile rewards (K = 4) and the pass rate they give
TABLE = {0: [1, 1, 1, 1],   # 1.0  solved
         1: [0, 0, 0, 0],   # 0.0  unsolved
         2: [1, 0, 1, 0],   # 0.5  informative, weight 0.25
         3: [1, 0, 0, 0],   # 0.25 informative, weight 0.1875
         4: [1, 1, 1, 0],   # 0.75 informative, weight 0.1875
         5: [0.5, 1, 0.99, float("nan")]}  # threshold 1: [0, 1, 0] (NaN is no evidence) -> 1/3


def test_pure_helpers_against_hand_values():
    assert pass_rates([[1, 0, 0, 0], [], [1, 1]]) == [0.25, None, 1.0]
    assert [pool_of(r) for r in (None, 0.0, 1.0, 0.5)] == ["unprofiled", "unsolved", "solved", "informative"]
    assert draw_weight(0.25, 2.0) == pytest.approx(0.1875 ** 2)
    assert draw_weight(0.9, 0.0) == 1.0 and draw_weight(0.0, 0.0) == 0.0
    assert unsolved_quota(0.0, 0.5, 3) == (1, 0.5)
    credit, counts = 0.0, []
    for _ in range(10):  # share 0.1 of 8 prompts: 0.8 a draw -> 8 unsolved items in 10 draws
        k, credit = unsolved_quota(credit, 0.1, 8)
        counts.append(k)
    assert counts == [0, 1, 1, 1, 1, 0, 1, 1, 1, 1] and sum(counts) == 8


class ListTask:
    """A finite train split sorted by a column, as a dataset file may be: ``a-0 .. a-5`` then ``b-0 .. b-5``."""

    names = [f"{family}-{i}" for family in "ab" for i in range(6)]

    def prompt(self, index, split="train"):
        return Prompt(self.names[index % len(self.names)], [1], index)

    def num_prompts(self, split):
        return len(self.names)


def test_a_capped_finite_split_is_spread_over_the_whole_list():
    # 12 tasks, a cap of 4: indices 0, 3, 6, 9 (i * 12 // 4) -> both families, not a-0 .. a-3
    s = DifficultySampler(ListTask(), SamplerConfig(profile_samples=0, max_items=4), seed=3, correct_threshold=1.0,
                          batch=2, group_size=4)
    s.take(1)
    assert [ListTask.names[i] for i in s.items] == ["a-0", "a-3", "b-0", "b-3"]
    whole = DifficultySampler(ListTask(), SamplerConfig(profile_samples=0, max_items=50), seed=3,
                              correct_threshold=1.0, batch=2, group_size=4)
    whole.take(1)
    assert whole.items == list(range(12))


def test_an_empty_finite_split_is_one_config_error():
    class Empty(ListTask):
        names = []

    s = DifficultySampler(Empty(), SamplerConfig(profile_samples=0, max_items=4), seed=3, correct_threshold=1.0,
                          batch=2, group_size=4)
    with pytest.raises(ConfigError, match="train split has no prompts"):
        s.take(1)


def test_items_of_an_endless_stream_are_the_distinct_prompts_of_its_first_indices():
    s = sampler(distinct=6, table=TABLE, max_items=20)
    s.take(1)
    assert s.items == [0, 1, 2, 3, 4, 5]
    capped = sampler(distinct=6, table=TABLE, max_items=4)
    capped.take(1)
    assert capped.items == [0, 1, 2, 3]


def test_profile_pools_and_weights_match_the_table():
    calls = []
    s = sampler(table=TABLE, calls=calls, batch=2, group=4)
    s.take(2)
    # 6 items x K=4 in batches of P*G = 8 rows = 2 items: 3 batches, the first pushes the policy
    assert calls == [(2, 4, 0, True), (2, 4, 1, False), (2, 4, 2, False)]
    rates = pass_rates(s.windows)
    assert rates[:5] == [1.0, 0.0, 0.5, 0.25, 0.75] and rates[5] == pytest.approx(1 / 3)
    assert s.windows[5] == [0, 1, 0]
    m = s.metrics()
    assert (m["sampler/informative"], m["sampler/solved"], m["sampler/unsolved"], m["sampler/unprofiled"]) == \
        (4, 1, 1, 0)
    assert m["sampler/profile_trials"] == 24 and m["sampler/profiles"] == 1
    assert m["sampler/mean_pass_rate"] == pytest.approx((1 + 0 + 0.5 + 0.25 + 0.75 + 1 / 3) / 6)
    assert s.metrics()["sampler/profile_trials"] == 0  # per step; the total stays
    assert [draw_weight(r, 1.0) for r in rates] == pytest.approx([0, 0, 0.25, 0.1875, 0.1875, 2 / 9])


def test_draws_follow_the_weights_and_never_the_set_aside():
    s = sampler(table=TABLE)
    s.take(1)
    counts = [0] * 6
    for _ in range(4000):
        for j in s.choose(1):
            counts[j] += 1
    assert counts[0] == 0 and counts[1] == 0  # solved set aside; unsolved share 0
    weights = [0.25, 0.1875, 0.1875, 2 / 9]
    for j, w in zip(range(2, 6), weights):
        p = w / sum(weights)
        assert abs(counts[j] / 4000 - p) < 4 * math.sqrt(p * (1 - p) / 4000), (j, counts)


def test_a_draw_is_without_replacement_and_fills_from_unsolved_then_solved():
    s = sampler(table=TABLE)
    s.take(1)
    assert sorted(s.choose(4)) == [2, 3, 4, 5]
    five = s.choose(5)
    assert sorted(five[:4]) == [2, 3, 4, 5] and five[4] == 1  # informative first, then the unsolved item
    six = s.choose(6)
    assert six[5] == 0 and sorted(six) == [0, 1, 2, 3, 4, 5]
    eight = s.choose(8)
    assert sorted(eight[:6]) == [0, 1, 2, 3, 4, 5] and len(eight) == 8  # then items repeat


def test_unsolved_share_gives_the_credits_items_to_the_unsolved_pool():
    table = {0: [0] * 4, 1: [0] * 4, 2: [1, 0, 1, 0], 3: [1, 0, 0, 0], 4: [1, 1, 0, 0], 5: [1, 1, 1, 0]}
    s = sampler(table=table, unsolved_share=0.25)
    s.take(1)  # the profile; its draw of 1 leaves a credit of 0.25
    per_draw = [sum(j in (0, 1) for j in s.choose(4)) for _ in range(6)]
    assert per_draw == [1, 1, 1, 1, 1, 1]
    s.credit = 0.0
    per_draw = [sum(j in (0, 1) for j in s.choose(2)) for _ in range(4)]  # 0.5 a draw
    assert per_draw == [0, 1, 0, 1]


def test_rl_groups_update_the_window():
    s = sampler(table=TABLE, window=8)
    s.take(1)
    # item 0 (solved 4/4) has a group of 4 with one failure: window 1,1,1,1,1,0,1,1 -> 7/8, informative again
    s.observe([0, 3], [1, 0, 1, 1, 1, 1, 1, 1], 4)
    assert s.windows[0] == [1, 1, 1, 1, 1, 0, 1, 1]
    assert s.windows[3] == [1, 0, 0, 0, 1, 1, 1, 1]
    s.observe([3], [1, 1, 1, 1], 4)  # the window keeps the last 8 outcomes
    assert s.windows[3] == [1, 1, 1, 1, 1, 1, 1, 1] and pool_of(pass_rates(s.windows)[3]) == "solved"
    s.observe([10 ** 6], [1, 0, 1, 0], 4)  # a prompt that is no item: counted for the plateau only
    assert list(s.recent) == [0, 1, 1, 0]  # groups 1,0,1,1 | 1,1,1,1 | 1,1,1,1 | 1,0,1,0


def test_plateau_reprofiles_when_the_pool_runs_dry_after_the_cooldown():
    calls = []
    s = sampler(table=TABLE, calls=calls, batch=2, plateau_steps=2, plateau_all_same=1.0)
    s.take(2)
    assert len(calls) == 3
    for j in (2, 3, 4, 5):  # every informative item now solved: 0 left to draw < batch 2
        s.observe([j], [1, 1, 1, 1, 1, 1, 1, 1], 8)
    s.take(2)
    assert len(calls) == 6 and s.profiles == 2  # 4 groups = 2 steps x 2 prompts: cooldown met
    assert pass_rates(s.windows)[2] == 0.5  # the profile replaced the windows
    s.take(2)
    assert len(calls) == 6  # no group observed since: no re-profile


def test_a_profile_that_finds_too_few_items_doubles_the_wait():
    solved = {j: [1, 1, 1, 1] for j in range(6)}
    s = sampler(table=solved, batch=2, plateau_steps=1)
    s.take(2)
    assert s.backoff == 2  # everything solved: 0 items left < 2
    for waited in range(1, 4):
        s.observe([0], [1, 1, 1, 1], 4)
        assert s.plateau() == (waited >= 4)  # 1 step x 2 groups x backoff 2 = 4 groups
    s.observe([0], [1, 1, 1, 1], 4)
    s.take(2)
    assert s.profiles == 2 and s.backoff == 4
    s.profiler = table_profiler(TABLE)  # the policy unlearned: 4 informative items >= 2 resets the wait
    s.since_profile = 8
    s.take(2)
    assert s.profiles == 3 and s.backoff == 1


def test_plateau_waits_for_the_cooldown_and_fires_on_all_same_groups():
    calls = []
    s = sampler(table=TABLE, calls=calls, batch=2, plateau_steps=2, plateau_all_same=0.75)
    s.take(2)
    s.observe([2, 3, 4], [1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0], 4)  # 2 of 3 all-same, under the 4-group wait
    s.take(2)
    assert s.profiles == 1
    s.observe([5], [0, 0, 0, 0], 4)  # 3 of 4 all-same = 0.75 >= 0.75
    assert s.plateau()
    s.take(2)
    assert s.profiles == 2 and len(calls) == 6
    never = sampler(table=TABLE, plateau_steps=0)
    never.take(2)
    for _ in range(10):
        never.observe([2], [1, 1, 1, 1], 4)
    assert not never.plateau()


def test_profile_samples_zero_starts_unprofiled_and_clears_on_a_plateau():
    s = sampler(table=None, profile_samples=0, plateau_steps=1, plateau_all_same=1.0, batch=2)
    got = s.take(2)
    assert len(got) == 2 and s.metrics()["sampler/unprofiled"] == 6 and s.profiles == 0
    s.observe([0, 1], [1, 1, 1, 1, 1, 1, 1, 1], 4)
    assert pool_of(pass_rates(s.windows)[0]) == "solved"
    s.take(2)  # 2 all-same groups of 2 (1 step): the estimates are cleared
    assert s.profiles == 1 and s.metrics()["sampler/unprofiled"] == 6


def test_resume_draws_exactly_what_the_uninterrupted_sampler_draws():
    def run(s, steps):
        out = []
        for _ in range(steps):
            step = s.cursor // 2
            prompts = s.take(2)
            out.append([p.index for p in prompts])
            # an even item's group is all-same, an odd item's mixed: the plateau fires now and then
            rewards = [float((step + p.index + i * (p.index % 2)) % 3 == 0) for p in prompts for i in range(4)]
            s.observe([p.index for p in prompts], rewards, 4)
        return out

    spec = dict(table=TABLE, unsolved_share=0.3, plateau_steps=1, plateau_all_same=0.5)
    straight = sampler(**spec)
    expected = run(straight, 12)
    first = sampler(**spec)
    head = run(first, 5)
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)
    buffer.seek(0)
    resumed = sampler(**spec)
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    assert head + run(resumed, 7) == expected
    assert resumed.profiles == straight.profiles > 1 and resumed.cursor == straight.cursor == 24


# the refill's first test: items 0-3 profiled, then 4 solved, 5 at 0.25, 6 at 0.75
REFILL = {0: [1, 1, 1, 1], 1: [0, 0, 0, 0], 2: [1, 1, 1, 1], 3: [1, 0, 1, 0], 4: [1, 1, 1, 1], 5: [1, 0, 0, 0],
          6: [1, 1, 1, 0]}


def test_refill_retires_the_solved_and_profiles_fresh_items_in_their_places():
    # pool 0-3: 0 and 2 solved -> round 1 puts stream items 4 and 5 at their places; 4 is solved -> round 2
    # puts 6 at its place; 6 is informative and the rounds are spent
    calls = []
    s = sampler(distinct=10, table=REFILL, calls=calls, max_items=4, refill_rounds=2, batch=2, group=4)
    s.take(2)
    assert calls == [(2, 4, 0, True), (2, 4, 1, False), (2, 4, 2, False), (1, 4, 3, False)]  # push once
    assert s.items == [6, 1, 5, 3] and s.retired == [0, 2, 4] and s.walk == 7
    assert s.windows == [[1, 1, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0], [1, 0, 1, 0]]
    assert s.index_of == {6: 0, 1: 1, 5: 2, 3: 3}
    m = s.metrics()
    assert (m["sampler/informative"], m["sampler/unsolved"], m["sampler/solved"], m["sampler/retired"]) == (3, 1, 0, 3)
    assert m["sampler/profile_trials"] == (4 + 2 + 1) * 4
    s.observe([0], [1, 1, 1, 1], 4)  # a retired item's group: no item's window changes
    assert s.windows[0] == [1, 1, 1, 0]
    off = sampler(distinct=10, table=REFILL, max_items=4)
    off.take(2)
    assert off.items == [0, 1, 2, 3] and off.retired == [] and off.metrics()["sampler/solved"] == 2


def test_refill_walks_a_finite_split_spread_over_it():
    # 12 rows, pool 0, 3, 6, 9 (every item solved); the walk j * 7 mod 12 = 0, 7, 2, 9, 4, 11, ... skips
    # the rows already in the pool: 7, 2, 4, 11 take the four places
    assert walk_stride(12) == 7 and walk_stride(1) == 1 and walk_stride(10) == 7  # 6 shares 2 with 10
    s = DifficultySampler(ListTask(), SamplerConfig(profile_samples=4, max_items=4, refill_rounds=1), seed=3,
                          correct_threshold=1.0, batch=2, group_size=4,
                          profiler=lambda prompts, k, number, first: [1.0] * (len(prompts) * k))
    s.take(2)
    assert [ListTask.names[i] for i in s.retired] == ["a-0", "a-3", "b-0", "b-3"]
    assert s.items == [7, 2, 4, 11] and [ListTask.names[i] for i in s.items] == ["b-1", "a-2", "a-4", "b-5"]
    assert s.walk == 6 and not s.exhausted


def test_refill_stops_when_the_stream_has_nothing_new_and_keeps_the_unreplaced():
    # 5 distinct prompts, a pool of 4, all solved: round 1 finds only item 4 (then 16 x 4 indices of
    # repeats), so only position 0 is replaced; round 2 finds nothing and the rounds stop
    solved = {j: [1, 1, 1, 1] for j in range(5)}
    calls = []
    s = sampler(distinct=5, table=solved, calls=calls, max_items=4, refill_rounds=3)
    s.take(2)
    assert s.items == [4, 1, 2, 3] and s.retired == [0] and s.exhausted and s.walk == 4 + 1 + 16 * 4
    assert calls == [(2, 4, 0, True), (2, 4, 1, False), (1, 4, 2, False)]
    assert s.metrics()["sampler/solved"] == 4  # kept in the pool, as fill


# the top-up's test: items 0-2 informative and 3 unsolved after the profile; the fresh items 4 (solved) and 5
TOP_UP = {0: [1, 0, 1, 0], 1: [1, 0, 0, 0], 2: [1, 1, 0, 0], 3: [0, 0, 0, 0], 4: [1, 1, 1, 1], 5: [1, 0, 1, 1]}


def test_top_up_replaces_the_solved_items_between_profiles_and_keeps_the_other_windows():
    # pool of 4, refill_below 0.5: a top-up is due when fewer than 2 items are left to draw from
    calls = []
    s = sampler(distinct=10, table=TOP_UP, calls=calls, max_items=4, refill_rounds=1, refill_below=0.5)
    s.take(2)
    assert calls == [(2, 4, 0, True), (2, 4, 1, False)] and s.retired == []  # nothing solved to refill
    assert s.metrics()["sampler/profile_trials"] == 4 * 4
    s.observe([0, 2], [1] * 8 + [1, 0, 0, 0, 0, 0, 0, 0], 8)  # item 0 solved: 2 left (1, 2), not fewer than 2
    s.take(2)
    assert len(calls) == 2 and not s.running_low()
    s.observe([1], [1] * 8, 8)  # item 1 solved too: 1 left < 2 -> retire 0 and 1, profile 4 and 5 (one round)
    assert s.running_low()
    s.take(2)
    assert calls[2:] == [(2, 4, 2, True)]  # the current policy pushed once, K samples of each fresh item
    assert s.items == [4, 5, 2, 3] and s.retired == [0, 1] and s.walk == 6
    assert s.windows == [[1, 1, 1, 1], [1, 0, 1, 1], [1, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0]]  # 2: its RL group's
    assert s.since_profile == 0 and not s.recent  # the plateau's wait restarts
    m = s.metrics()
    assert (m["sampler/top_ups"], m["sampler/profiles"], m["sampler/profile_trials"]) == (1, 1, 2 * 4)
    assert (m["sampler/informative"], m["sampler/solved"], m["sampler/unsolved"]) == (2, 1, 1)
    s.take(2)  # 2 left (5, 2): item 4 stays solved in the pool until the pool runs low again
    assert len(calls) == 3 and s.top_ups == 1


def test_top_up_needs_a_solved_item_a_fresh_one_and_a_share_set():
    unsolved = {j: [0, 0, 0, 0] for j in range(10)}
    s = sampler(distinct=10, table=unsolved, max_items=4, refill_rounds=1, refill_below=1.0)
    s.take(2)
    assert not s.running_low()  # 0 left, but nothing solved to replace
    solved = {j: [1, 1, 1, 1] for j in range(5)}
    dry = sampler(distinct=5, table=solved, max_items=4, refill_rounds=1, refill_below=1.0, plateau_steps=0)
    dry.take(2)  # the profile's round finds item 4 only, and the walk is spent
    assert dry.exhausted and dry.items == [4, 1, 2, 3] and not dry.running_low()
    off = sampler(distinct=10, table={j: [1, 1, 1, 1] for j in range(10)}, max_items=4, refill_rounds=1,
                  plateau_steps=0)
    off.take(2)
    assert not off.running_low() and off.metrics()["sampler/top_ups"] == 0


def test_top_up_waits_while_the_unsolved_items_hold_the_pool_low():
    # pool of 4 at b = 0.5 (a floor of 2): three unsolved items and one informative. Once item 3 is solved, 0
    # items are left; replacing the one solved item could bring back 1 < 2, so no top-up: every newly solved
    # item would otherwise top up on its own
    table = {0: [0, 0, 0, 0], 1: [0, 0, 0, 0], 2: [0, 0, 0, 0], 3: [1, 0, 0, 0]}
    s = sampler(distinct=10, table=table, max_items=4, refill_rounds=1, refill_below=0.5, plateau_steps=0)
    s.take(2)
    s.observe([3], [1] * 8, 8)
    assert not s.running_low()


def test_a_top_up_that_finds_nothing_fresh_is_not_counted():
    # a pool holding every distinct prompt (4 of them, max_items 8): items 0 and 1 solved by RL, the top-up
    # is due (2 left < 4 and 2 + 2 >= 4) but its walk finds nothing new: nothing profiled, no top-up counted
    calls = []
    table = {j: [1, 0, 1, 0] for j in range(4)}
    s = sampler(distinct=4, table=table, calls=calls, max_items=8, refill_rounds=1, refill_below=1.0,
                plateau_steps=0)
    s.take(2)
    s.observe([0, 1], [1] * 16, 8)
    assert s.running_low()
    s.take(2)
    assert len(calls) == 2 and s.exhausted and s.top_ups == 0 and s.retired == [] and not s.running_low()


def test_a_top_up_without_a_profiler_changes_nothing_before_it_refuses():
    s = sampler(distinct=10, table=TOP_UP, max_items=4, refill_rounds=1, refill_below=0.5)
    s.take(2)
    s.observe([0, 1], [1] * 16, 8)
    s.profiler = None
    before = (list(s.items), [list(w) for w in s.windows], s.walk, list(s.retired))
    with pytest.raises(ConfigError, match="no profiler"):
        s.take(2)
    assert (s.items, s.windows, s.walk, s.retired) == before


@pytest.mark.parametrize("between", [dict(plateau_steps=1, plateau_all_same=0.5),  # a re-profile every step
                                     dict(plateau_steps=0, refill_below=0.75)])  # top-ups, never a re-profile
def test_resume_with_refill_draws_exactly_what_the_uninterrupted_sampler_draws(between):
    def run(s, steps):  # every group all-same
        out = []
        for _ in range(steps):
            step = s.cursor // 2
            prompts = s.take(2)
            out.append([p.index for p in prompts])
            s.observe([p.index for p in prompts], [float((step + p.index) % 2 == 0) for p in prompts for _ in "abcd"], 4)
        return out

    def learning(prompts, k, number, first):
        """A policy that keeps learning: an item is solved in the profile batches where (item + batch) % 3 == 0,
        half solved in the others, so every re-profile finds other items solved."""
        return [float((int(p.text[4:]) + number) % 3 == 0 or i % 2 == 0) for p in prompts for i in range(k)]

    def make():
        s = sampler(distinct=40, max_items=4, refill_rounds=1, **between)
        s.profiler = learning
        return s

    straight = make()
    expected = run(straight, 12)
    first = make()
    head = run(first, 6)
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)
    buffer.seek(0)
    resumed = make()
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    assert resumed.keys == first.keys
    assert head + run(resumed, 6) == expected
    assert resumed.retired == straight.retired and len(straight.retired) > 2
    # top-ups (the second case) at steps 5 (before the checkpoint), 6 and 7; at step 10 the one solved item
    # could not bring the pool back to 3 of 4 (two items unsolved): none
    assert (straight.profiles, straight.top_ups) == ((12, 0) if between["plateau_steps"] else (1, 3))
    assert first.top_ups == (0 if between["plateau_steps"] else 1)
    assert (resumed.profiles, resumed.top_ups) == (straight.profiles, straight.top_ups)
    assert (resumed.items, resumed.walk, resumed.windows) == (straight.items, straight.walk, straight.windows)
    older = first.state_dict()  # a checkpoint from before the refill existed: no walk, no retired items
    for key in ("walk", "exhausted", "retired", "top_ups"):
        del older[key]
    again = make()
    again.load_state_dict(older)
    assert (again.walk, again.exhausted, again.retired, again.top_ups) == (4, False, [], 0)  # an endless stream's walk: max_items


def test_uniform_and_difficulty_checkpoints_refuse_each_other():
    from trajkit.rl.state import PromptStream

    with pytest.raises(ConfigError, match="rollout.sampler=uniform"):
        sampler(table=TABLE).load_state_dict(PromptStream(FakeTask(3)).state_dict())
    with pytest.raises(ConfigError, match="rollout.sampler=difficulty"):
        PromptStream(FakeTask(3)).load_state_dict(sampler(table=TABLE).state_dict())


@pytest.mark.parametrize("overrides, key", [
    (["rollout.sampler=difficulty", "rollout.mode=async"], "rollout.mode=sync"),
    (["rollout.sampler=difficulty", "sampler.profile_samples=1"], "sampler.profile_samples=1"),
    (["rollout.sampler=difficulty", "sampler.profile_samples=8", "sampler.window=4"], "sampler.window >= 8"),
    (["rollout.sampler=difficulty", "sampler.unsolved_share=1.5"], "sampler.unsolved_share"),
    (["rollout.sampler=difficulty", "sampler.plateau_all_same=0"], "sampler.plateau_all_same"),
    (["rollout.sampler=best"], "rollout.sampler"),
    (["rollout.sampler=difficulty", "sampler.profile_samples=0", "sampler.refill_rounds=1"], "sampler.refill_rounds=1"),
    (["rollout.sampler=difficulty", "sampler.refill_rounds=-1"], "sampler.refill_rounds"),
    (["rollout.sampler=difficulty", "sampler.refill_below=0.5"], "sampler.refill_below=0.5"),
    (["rollout.sampler=difficulty", "sampler.refill_rounds=1", "sampler.refill_below=1.5"], "sampler.refill_below"),
])
def test_config_refusals_name_the_key(overrides, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.").replace("=", "=").replace(">", ">")):
        load_config(None, overrides)


def test_sampler_settings_under_the_uniform_sampler_are_ignored_each_named_in_a_warning(caplog):
    """A packaged config that draws by difficulty runs the uniform ablation with one override."""
    with caplog.at_level(logging.WARNING, logger="trajkit.config"):
        cfg = load_config(None, ["sampler.window=8", "sampler.refill_rounds=2", "sampler.max_items=256"])
    assert cfg.rollout.sampler == "uniform"
    said = [r.getMessage() for r in caplog.records]
    assert said == [f"sampler.{k} is a setting of the difficulty sampler, not read with rollout.sampler=uniform; "
                    "ignored" for k in ("window", "refill_rounds")]  # max_items=256 is the default: nothing to say
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="trajkit.config"):  # as Trainer(model="folder") rebuilds it
        rebuilt = dataclasses.replace(cfg, policy=dataclasses.replace(cfg.policy, source="path", path="elsewhere"))
    assert rebuilt.sampler is cfg.sampler and not caplog.records
    with caplog.at_level(logging.WARNING, logger="trajkit.config"):  # another config is another warning
        load_config(None, ["sampler.window=8"])
    assert [r.getMessage() for r in caplog.records] == said[:1]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="trajkit.config"):
        load_config(None, ["rollout.sampler=difficulty", "sampler.window=8"])
    assert not caplog.records


def test_the_difficulty_config_loads():
    cfg = load_config(None, ["rollout.sampler=difficulty", "sampler.profile_samples=8", "sampler.window=8"])
    assert cfg.rollout.sampler == "difficulty" and cfg.sampler.profile_samples == 8
