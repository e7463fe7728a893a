"""The difficulty sampler in the trainer (tiny random policy): on a task where every even item is solved
by construction and every odd one by one row of four, uniform sampling gives ``reward/groups_all_same``
0.5 each step and the difficulty sampler 0 (the solved items set aside after the profile); a resumed run
draws and samples exactly what the uninterrupted one does, and evaluating between steps changes nothing the
run trains on."""
import pytest
import torch

from trajkit.envs.rewards import RewardSet
from trajkit.rl.trainer import Trainer

G = 4


def half_solved(completions, index, **kwargs):
    """1.0 for every row of an even item; for an odd item 1.0 on the first row of each group of G only."""
    return [1.0 if n % 2 == 0 else float(i % G == 0) for i, n in enumerate(index)]


def _trainer(tiny, *overrides):
    t = Trainer(tiny("rollout.prompts_per_step=2", f"rollout.group_size={G}", *overrides), logger=False)
    make = t.state.task.prompt

    def prompt(index, split="train"):
        p = make(index, split)
        p.columns["index"] = index
        return p
    t.state.task.prompt = prompt
    t.state.rewards = RewardSet.build([half_solved])
    return t


def _assert_same_step(got, want, *keys):
    """Two runs' step results drew the same items, sampled the same tokens and logged the same ``keys``."""
    assert [s.metadata["prompt_index"] for s in got.samples] == [s.metadata["prompt_index"] for s in want.samples]
    assert [s.completion_ids for s in got.samples] == [s.completion_ids for s in want.samples]
    for key in keys:
        assert got.metrics[key] == want.metrics[key], key


DIFFICULTY = ("rollout.sampler=difficulty", "sampler.max_items=8", f"sampler.profile_samples={G}",
              "sampler.window=8", "sampler.unsolved_share=0")


def test_difficulty_sampler_sets_the_solved_items_aside(tiny):
    uniform = _trainer(tiny)
    uniform_all_same = [uniform.step_once().metrics["reward/groups_all_same"] for _ in range(3)]
    assert uniform_all_same == [0.5, 0.5, 0.5]
    t = _trainer(tiny, *DIFFICULTY)
    first = t.step_once()
    # the profile: 8 items x 4 samples; even items solved (4 of them), odd ones 1 of 4 = 0.25
    assert first.metrics["sampler/profile_trials"] == 8 * G
    assert (first.metrics["sampler/solved"], first.metrics["sampler/informative"],
            first.metrics["sampler/unsolved"], first.metrics["sampler/unprofiled"]) == (4, 4, 0, 0)
    assert t.state.stream.items == list(range(8))
    rest = [t.step_once() for _ in range(2)]
    for result in [first] + rest:
        indices = [s.metadata["prompt_index"] for s in result.samples[::G]]
        assert all(i % 2 == 1 for i in indices) and len(set(indices)) == 2, indices
        assert result.metrics["reward/groups_all_same"] == 0.0
    assert rest[-1].metrics["sampler/profile_trials"] == 0
    assert rest[-1].metrics["sampler/profile_trials_total"] == 8 * G
    assert rest[-1].metrics["sampler/mean_pass_rate"] == pytest.approx(0.5 * 1.0 + 0.5 * 0.25)


def test_resumed_run_draws_what_the_uninterrupted_run_draws(tiny, tmp_path):
    # 3 items: 0 and 2 solved, 1 informative (< 2 a step): the first profile doubles the plateau's wait to
    # 2 steps, so the step after the checkpoint (step 3) re-profiles
    spec = DIFFICULTY + ("sampler.max_items=3", "sampler.unsolved_share=0.25", "sampler.plateau_steps=1")
    straight = _trainer(tiny, *spec)
    for _ in range(3):
        expected = straight.step_once()
    first = _trainer(tiny, *spec)
    for _ in range(2):
        first.step_once()
    path = first.save(str(tmp_path / "ckpt"))
    resumed = _trainer(tiny, *spec, f"checkpoint.resume_from={path}")
    _assert_same_step(resumed.step_once(), expected, "reward/raw", "loss/pg", "sampler/informative",
                      "sampler/profiles", "sampler/profile_trials_total")
    assert resumed.state.stream.windows == straight.state.stream.windows
    assert expected.metrics["sampler/profiles"] == 2 and expected.metrics["sampler/profile_trials"] == 3 * G


def test_refill_replaces_the_solved_items_in_the_trainer(tiny):
    # pool 0-3: 0 and 2 solved (even) -> round 1 profiles stream items 4 and 5 in their places; 4 is solved
    # -> round 2 profiles 6 in its place (solved too, and the rounds are spent): pool 6, 1, 5, 3, all odd
    # items but 6 informative at 0.25, the steps draw only them
    t = _trainer(tiny, *DIFFICULTY, "sampler.max_items=4", "sampler.refill_rounds=2")
    first = t.step_once()
    assert t.state.stream.items == [6, 1, 5, 3] and t.state.stream.retired == [0, 2, 4]
    assert first.metrics["sampler/profile_trials"] == (4 + 2 + 1) * G
    assert (first.metrics["sampler/solved"], first.metrics["sampler/informative"],
            first.metrics["sampler/retired"]) == (1, 3, 3)
    for result in [first, t.step_once()]:
        indices = [s.metadata["prompt_index"] for s in result.samples[::G]]
        assert set(indices) <= {1, 3, 5} and len(set(indices)) == 2, indices
        assert result.metrics["reward/groups_all_same"] == 0.0


def test_evaluating_between_steps_changes_nothing_the_run_trains(tiny):
    # the eval has its own seed and the sampler never sees its scores: a run evaluated before every step
    # (sampled, so the eval draws random numbers) draws, samples and learns exactly what a run never evaluated
    # does, so a config may change eval.every without changing its trained policy
    spec = DIFFICULTY + ("sampler.max_items=4", "sampler.refill_rounds=1", "sampler.refill_below=0.5",
                         "eval.num_prompts=4", "eval.samples=2", "eval.temperature=1.0")
    plain, evaluated = _trainer(tiny, *spec), _trainer(tiny, *spec)
    evals = []
    for _ in range(4):
        evals.append(evaluated.evaluate()["eval/reward"])
        want = plain.step_once()
        _assert_same_step(evaluated.step_once(), want, "reward/raw", "sampler/profile_trials_total")
    assert len(evals) == 4 and all(0.0 <= e <= 1.0 for e in evals)
    assert evaluated.state.stream.windows == plain.state.stream.windows
    trained = plain.state.side.policy.state_dict()
    for name, value in evaluated.state.side.policy.state_dict().items():
        assert torch.equal(value, trained[name]), name
