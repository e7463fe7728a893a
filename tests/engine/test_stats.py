"""GenerationStats: one round's counting by hand, and merging the stats of several generate calls."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.engine.helpers import perturbed_copy, target_model
from trajkit.engine import DraftModel, Engine, GenerationStats, SamplingParams
from trajkit.engine.types import _SUMMED

PROMPTS = [[3, 4], [1, 2, 3, 4, 5, 6], [7]]


def test_add_round_counts_tried_positions():
    stats = GenerationStats(num_draft_tokens=3, position_tried=[0] * 3, position_accepted=[0] * 3)
    # row 0: 3 drafts, 1 accepted -> positions 0 and 1 tried; row 1: 2 drafts, both accepted -> 0, 1 tried;
    # row 2: no draft (a plain step) -> nothing tried
    stats.add_round([3, 2, 0], [1, 2, 0], [[0.5, 0.25, 0.125], [1.0, 0.75, 0.0], [0.0, 0.0, 0.0]])
    assert stats.position_tried == [2, 2, 0] and stats.position_accepted == [2, 1, 0]
    assert (stats.proposed, stats.accepted, stats.step_tokens, stats.row_steps) == (5, 3, 6, 3)
    assert stats.overlap_sum == 0.5 + 0.25 + 1.0 + 0.75
    assert stats.alpha == pytest.approx(2.5 / 4)
    assert stats.per_position_acceptance == [1.0, 0.5, 0.0]


def test_merge_sums_counters_of_two_calls():
    target = target_model(seed=11, dtype=torch.float64)
    draft = perturbed_copy(target, noise=0.5, seed=12)
    params = SamplingParams(temperature=1.0, max_new_tokens=12, seed=3)
    a = Engine(target, DraftModel(draft), num_draft_tokens=2).generate(PROMPTS, params).stats
    b = Engine(target, DraftModel(draft), num_draft_tokens=3).generate(PROMPTS * 2, params).stats
    c = Engine(target).generate(PROMPTS, params).stats  # plain: empty per-position lists
    merged = GenerationStats.merge(a, b, c)

    assert merged.num_draft_tokens == 3
    for name in ("rows", "new_tokens", "target_calls", "draft_calls", "row_steps", "step_tokens",
                 "proposed", "accepted"):
        assert getattr(merged, name) == getattr(a, name) + getattr(b, name) + getattr(c, name), name
    for name in ("overlap_sum", "seconds", "target_seconds", "draft_seconds"):
        assert getattr(merged, name) == pytest.approx(getattr(a, name) + getattr(b, name) + getattr(c, name))
    assert len(a.position_tried) == 2 and len(b.position_tried) == 3 and c.position_tried == []
    assert merged.position_tried == [a.position_tried[0] + b.position_tried[0],
                                     a.position_tried[1] + b.position_tried[1], b.position_tried[2]]
    assert merged.position_accepted == [a.position_accepted[0] + b.position_accepted[0],
                                        a.position_accepted[1] + b.position_accepted[1], b.position_accepted[2]]
    # derived rates come from the merged counters, not from averaging the calls' rates
    assert merged.acceptance_rate == (a.accepted + b.accepted) / (a.proposed + b.proposed)
    assert merged.mean_acceptance_length == (a.step_tokens + b.step_tokens + c.step_tokens) / (
        a.row_steps + b.row_steps + c.row_steps)
    assert merged.alpha == pytest.approx((a.overlap_sum + b.overlap_sum) / (sum(a.position_tried)
                                                                            + sum(b.position_tried)))
    assert merged.per_position_acceptance[2] == b.per_position_acceptance[2]
    assert 0 < merged.accepted < merged.proposed and merged.to_dict()["alpha"] == merged.alpha


def test_merge_of_nothing_and_field_coverage():
    assert GenerationStats.merge() == GenerationStats()
    counters = {f.name for f in dataclasses.fields(GenerationStats)}
    # every counter is summed by merge, except k (max) and the per-position lists (element-wise)
    assert counters == set(_SUMMED) | {"num_draft_tokens", "position_tried", "position_accepted"}
