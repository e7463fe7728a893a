"""The Ray trainer against the in-process one (the reference): same seed, same config, trajkit backend ->
the same samples, log-probs, rewards, losses and weights, bit for bit (float32, ``torch.equal``); and an
actor that raises or dies fails the step with its message, within the configured timeout.

Both runs use the session's one local Ray (tests/conftest.py ``ray_cluster``) and the RL tests' tiny models
(tests/rl/conftest.py: one thread, which the actors take from ``threads=1``)."""
import re

import pytest
import torch

from tests.rl.conftest import TINY, one_thread  # noqa: F401 (autouse: tiny models on one thread)
from trajkit.cluster import ClusterError, ClusterTrainer
from trajkit.errors import ConfigError
from trajkit.models.load import load_model
from trajkit.rl.config import load_config
from trajkit.envs.base import Prompt
from trajkit.rl.trainer import Trainer

pytestmark = pytest.mark.usefixtures("ray_cluster")

# wall-clock and throughput figures, and the count of forward passes (each worker runs its own: the cluster
# sums them), are the only metrics allowed to differ
UNEQUAL = ("time/", "share/", "gen/tokens_per_s", "gen/target_calls")
# Float32 results that depend on the shape of a worker's batch, compared to 1e-6 relative:
# - gen/alpha, sum_v min(p, q) of the draft and target distributions added up over the rows a worker holds:
#   rows split over workers add them in another order (on AVX-512 the 8th digit moved: 0.94633029699 vs
#   0.94633028904);
# - the engine's per-token log-probs and the mismatch metrics read from them: a worker decodes 4 of the step's
#   8 rows, the in-process engine all 8, and a float32 GEMM over 4 rows may round one token's logit otherwise
#   (measured on this AMD EPYC: one ulp, -5.554346561 vs -5.554346084, at row 4, token 3).
# Sampled tokens, rewards, losses, gradients and weights stay bitwise equal: the policy side is one worker.
FLOAT_STATS = ("gen/alpha",)
ENGINE_FLOATS = ("mismatch/",)


def even_share(completion_ids, **kwargs):
    """Fraction of even token ids: differs within a group, so every step has a gradient."""
    return [sum(t % 2 == 0 for t in ids) / max(len(ids), 1) for ids in completion_ids]


def config(tmp_path, name, *overrides):
    return load_config(None, TINY + [f"log.out_dir={tmp_path / name}", "steps=2", *overrides])


def run(trainer, steps):
    """``steps`` steps -> (their results, the policy's weights after them)."""
    return [trainer.step_once() for _ in range(steps)], {k: v.clone() for k, v in weights(trainer).items()}


def weights(trainer):
    if trainer.state.side is not None:
        return trainer.state.side.policy.state_dict()
    import ray

    return ray.get(trainer.cluster.policy.weights.remote(), timeout=60)["policy"]


def assert_same_steps(ref, got, unequal=UNEQUAL, versions=True):
    """``versions=False``: a resumed run's engine counts its syncs from 0 again (in process too)."""
    for a, b in zip(ref, got, strict=True):
        assert [s.prompt_ids for s in a.samples] == [s.prompt_ids for s in b.samples]
        assert [s.completion_ids for s in a.samples] == [s.completion_ids for s in b.samples]
        for x, y in zip(a.samples, b.samples, strict=True):  # engine log-probs: batch-shape rounding only
            assert y.logprobs == pytest.approx(x.logprobs, rel=1e-6, abs=1e-7)
        assert [s.reward for s in a.samples] == [s.reward for s in b.samples]
        if versions:
            assert [s.policy_version for s in a.samples] == [s.policy_version for s in b.samples]
        keys = {k for k in a.metrics if not k.startswith(unequal)}
        assert keys == {k for k in b.metrics if not k.startswith(unequal)}
        floats = {k for k in keys if k in FLOAT_STATS or k.startswith(ENGINE_FLOATS)}
        assert {k: b.metrics[k] for k in keys - floats} == {k: a.metrics[k] for k in keys - floats}
        for k in floats:  # float32 results over the rows a worker holds: another shape, other bits
            assert b.metrics[k] == pytest.approx(a.metrics[k], rel=1e-6, abs=1e-7), k
        assert set(a.timer.seconds) == set(b.timer.seconds)  # the same five stages, each timed


def test_two_rollout_workers_and_a_policy_worker_equal_the_in_process_step_bit_for_bit(tmp_path):
    ref = Trainer(config(tmp_path, "local", "steps=3"), logger=False, reward_funcs=[even_share])
    ref_steps, ref_weights = run(ref, 2)
    ref_third = ref.step_once()
    ref.close()
    trainer = ClusterTrainer(config(tmp_path, "ray", "cluster.ray=true", "cluster.rollout_workers=2"), logger=False,
                             reward_funcs=[even_share])
    try:
        steps, got = run(trainer, 2)
        assert len(trainer.cluster.rollouts.workers) == 2
        # the workers really split the batch: each drew half of the step's 8 rows
        stats = trainer.state.rollout.backend.stats()["workers"]
        assert [s["calls"] for s in stats] == [2, 2] and stats[0]["new_tokens"] > 0 < stats[1]["new_tokens"]
        saved = trainer.save(str(tmp_path / "ckpt"))
    finally:
        trainer.close()
    assert_same_steps(ref_steps, steps)
    assert ref_steps[0].metrics["loss/grad_norm"] > 0 < ref_steps[1].metrics["loss/grad_norm"]  # updates happened
    assert got.keys() == ref_weights.keys()
    assert all(torch.equal(got[k], ref_weights[k]) for k in ref_weights)
    # the policy worker's checkpoint holds those weights, as a plain HF folder, and all a resume needs: the
    # in-process trainer and the Ray trainer resumed from it both take the reference's third step
    loaded = load_model(f"{saved}/policy").state_dict()
    assert all(torch.equal(loaded[k], ref_weights[k]) for k in ref_weights)
    local = Trainer(config(tmp_path, "resumed", "steps=3", f"checkpoint.resume_from={saved}"), logger=False,
                    reward_funcs=[even_share])
    assert_same_steps([ref_third], [local.step_once()], versions=False)
    local.close()
    again = ClusterTrainer(config(tmp_path, "ray-resumed", "steps=3", f"checkpoint.resume_from={saved}",
                                  "cluster.ray=true", "cluster.rollout_workers=2"), logger=False,
                           reward_funcs=[even_share])
    try:
        assert again.step == 2
        assert_same_steps([ref_third], [again.step_once()], versions=False)
    finally:
        again.close()


def test_three_workers_a_distilled_draft_and_a_reference_model_equal_the_in_process_run(tmp_path):
    """Rows split 3/3/2 (a group cut across workers): per-row seeds keep every sample; the draft's weights
    (trained on the policy worker) reach the drafters; the reference model's KL term is computed there."""
    extra = ["draft.kind=model", "draft.distill=true", "draft.num_draft_tokens=2", "loss.kl_coef=0.05",
             "eval.every=2", "eval.num_prompts=6"]  # the evaluation runs through the workers too
    ref = Trainer(config(tmp_path, "local", *extra), logger=False, reward_funcs=[even_share])
    ref_steps, ref_weights = run(ref, 2)
    ref_draft = {k: v.clone() for k, v in ref.state.side.draft.state_dict().items()}
    ref.close()
    trainer = ClusterTrainer(config(tmp_path, "ray", *extra, "cluster.ray=true", "cluster.rollout_workers=3"),
                             logger=False, reward_funcs=[even_share])
    try:
        steps, got = run(trainer, 2)
        import ray

        draft = ray.get(trainer.cluster.policy.weights.remote(), timeout=60)["draft"]
    finally:
        trainer.close()
    # a group split across workers is prefilled once per worker, not once: the prefill counters differ
    assert_same_steps(ref_steps, steps, UNEQUAL + ("gen/prefill", "gen/shared_prompt", "gen/prompt_tokens"))
    assert ref_steps[1].metrics["gen/acceptance_rate"] > 0 and "draft/distill_ce" in ref_steps[1].metrics
    assert "loss/kl_ref" in ref_steps[1].metrics and "eval/reward" in ref_steps[1].metrics
    assert all(torch.equal(got[k], ref_weights[k]) for k in ref_weights)
    assert all(torch.equal(draft[k], ref_draft[k]) for k in ref_draft)


class OutOfVocabulary:
    """The copy task with one token id past the vocabulary appended to every prompt: the rollout worker's
    engine refuses it (a real failure inside an actor, not an injected exception)."""

    def __init__(self, task):
        self.task, self.name, self.env, self.reward_funcs = task, task.name, task.env, task.reward_funcs

    def prompt(self, index, split="train"):
        p = self.task.prompt(index, split)
        return Prompt(p.text, p.ids + [10**6], p.index, p.columns, p.meta, p.source)


def test_an_actor_that_raises_fails_the_step_with_its_message(tmp_path):
    from trajkit.models.tokenizer import byte_tokenizer
    from trajkit.envs.registry import make_task

    cfg = config(tmp_path, "bad", "cluster.ray=true", "cluster.rollout_workers=2", "cluster.timeout_s=60")
    tok = byte_tokenizer()
    trainer = ClusterTrainer(cfg, logger=False, tokenizer=tok, task=OutOfVocabulary(make_task(cfg.task, 0, tok)))
    try:
        with pytest.raises(ClusterError) as err:
            trainer.step_once()
        text = str(err.value)
        # both workers got bad rows; the step fails with the first failure to arrive (either worker's)
        assert re.search(r"rollout worker [01] generate failed in its Ray actor", text)
        assert "1000000" in text and "vocab" in text  # the engine's own message, from inside the actor
        assert "ray::RolloutWorker.generate()" in text and 'File "' in text  # and the actor's traceback
        assert "\x1b" not in text  # without Ray's terminal colours
    finally:
        trainer.close()


def test_a_layout_ray_cannot_hold_fails_at_once_naming_what_was_asked(tmp_path):
    cfg = config(tmp_path, "big", "cluster.ray=true", "cluster.rollout_workers=2", "cluster.worker_cpus=64",
                 "cluster.timeout_s=3")
    with pytest.raises(ConfigError, match=r"cannot place 3 actors of \{'CPU': 64.0\}.*cluster.worker_cpus"):
        ClusterTrainer(cfg, logger=False, reward_funcs=[even_share])


def test_the_split_layout_runs_the_same_step_and_a_dead_worker_fails_the_next(tmp_path):
    """``SPREAD`` on one node places every bundle there: the same samples as the in-process run's; then one
    rollout worker is killed and the next step fails naming it (Ray's actor-died error), without a hang."""
    import ray

    ref = Trainer(config(tmp_path, "local"), logger=False, reward_funcs=[even_share])
    ref_steps, _ = run(ref, 1)
    ref.close()
    trainer = ClusterTrainer(config(tmp_path, "split", "cluster.ray=true", "cluster.layout=split",
                                    "cluster.rollout_workers=2", "cluster.timeout_s=60"),
                             logger=False, reward_funcs=[even_share])
    try:
        steps, _ = run(trainer, 1)
        ray.kill(trainer.cluster.rollouts.workers[1])
        with pytest.raises(ClusterError, match="rollout worker 1 .*its Ray actor died"):
            trainer.step_once()
    finally:
        trainer.close()
    assert_same_steps(ref_steps, steps)
