"""The spurious-reward control (``shaping.control=random``): training rewards are seeded Bernoulli(0.5)
draws independent of the completions, the task's own reward metrics and the held-out evaluation are
untouched, and ``bench train --control random`` adds it as an arm."""
from __future__ import annotations

import json

import pytest

from trajkit.bench.train import parse_arms
from trajkit.cli.main import build_parser
from trajkit.rl.shaping import random_rewards
from trajkit.rl.trainer import Trainer


def test_random_rewards_are_seeded_bernoulli_halves():
    assert random_rewards(8, 3) == random_rewards(8, 3) != random_rewards(8, 4)
    many = random_rewards(20_000, 0)
    assert set(many) == {0.0, 1.0}
    assert abs(sum(many) / len(many) - 0.5) < 4 * (0.25 / 20_000) ** 0.5  # within 4 standard errors


def test_the_control_trains_on_random_rewards_and_evaluates_on_the_task(tiny):
    plain = Trainer(tiny("eval.every=1", "eval.num_prompts=8"), logger=False)
    control = Trainer(tiny("eval.every=1", "eval.num_prompts=8", "shaping.control=random"), logger=False)
    assert plain.evaluate() == control.evaluate()  # same weights, same held-out scoring
    a, b = plain.step_once(), control.step_once()
    assert a.metrics["reward/exact_match"] == b.metrics["reward/exact_match"]  # same rollouts, same task score
    assert [s.raw_reward for s in b.samples] == random_rewards(len(b.samples), _round_seed(control))
    assert "eval/reward" in b.metrics


def _round_seed(trainer) -> int:
    """The first step's first-round seed, as the generation stage computes it."""
    from trajkit.rl.dynamic import round_seed
    from trajkit.rl.step import step_seed

    return round_seed(step_seed(trainer.cfg.seed, 0), 0)


def test_bench_control_arm():
    assert parse_arms([], no_fixed=True, control="random") == {
        "plain": ["draft.kind=none", "draft.distill=false"], "spec": ["draft.distill=true"],
        "random": ["draft.kind=none", "draft.distill=false", "shaping.control=random"]}
    assert parse_arms(["a=optim.lr=0.1"], control="random")["random"] == ["optim.lr=0.1", "shaping.control=random"]
    with pytest.raises(SystemExit, match="already named"):
        parse_arms(["random=optim.lr=0.1"], control="random")


def test_bench_runs_the_control_arm(tmp_path):
    out = tmp_path / "train.json"
    args = build_parser().parse_args(["bench", "train", "--steps", "1", "--seeds", "1", "--out", str(out), "--plot", "",
                                      "--arm", "a=optim.lr=0.001", "--control", "random", "eval.every=1"])
    assert args.handler(args) == 0
    runs = json.loads(out.read_text())["runs"][0]
    assert list(runs) == ["a", "random"] and runs["random"]["eval"][0] == runs["a"]["eval"][0]
