"""The settings a TRL user expects: num_iterations (mu), the optimiser state in checkpoints or not, hub
names from the local cache, dataset shuffling, a learning-rate schedule."""
import json
import warnings

import pytest
import torch

from tests.traces.export.test_trl_load import tiny_llama, tok  # noqa: F401  (tok: the tiny tokenizer fixture)
from trajkit.errors import ConfigError
from trajkit.rl.batching import batch_logprobs, collate
from trajkit.rl.build import random_model
from trajkit.rl.checkpoint import read_trainer_state
from trajkit.rl.config import load_config
from trajkit.envs.sample import Sample
from trajkit.rl.trainer import Trainer
from trajkit.rl.update import lr_factor, update_policy

from .conftest import TINY


def _batch(cfg):
    policy = random_model(cfg.policy, vocab_size=259)
    samples = [Sample([1, 2], [3, 4, 5, 6][:n], [-1.0] * n, [1] * n) for n in (1, 2, 3, 4, 2, 3)]
    batch = collate(samples, torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, -2.0]), pad_id=0)
    old, _ = batch_logprobs(policy, batch, cfg.rollout.temperature, 8)
    return policy, batch, old


def test_two_iterations_are_two_updates_on_the_same_old_logprobs_and_the_second_is_clipped():
    cfg = load_config(None, TINY + ["optim.lr=0.05", "optim.minibatches=2"])
    mu2 = load_config(None, TINY + ["optim.lr=0.05", "optim.minibatches=2", "optim.num_iterations=2"])
    policy, batch, old = _batch(cfg)
    twice = [p.detach().clone() for p in policy.parameters()]
    opt = torch.optim.AdamW(policy.parameters(), lr=0.05)
    first = update_policy(policy, opt, batch, old, None, cfg)
    second = update_policy(policy, opt, batch, old, None, cfg)  # the reference: mu=1 twice, old log-probs kept
    reference = [p.detach().clone() for p in policy.parameters()]

    with torch.no_grad():
        for p, v in zip(policy.parameters(), twice):
            p.copy_(v)
    both = update_policy(policy, torch.optim.AdamW(policy.parameters(), lr=0.05), batch, old, None, mu2)
    for p, r in zip(policy.parameters(), reference):
        torch.testing.assert_close(p, r, rtol=0, atol=0)
    # pass 1 starts at the rollout policy (its first slice has ratio 1 exactly); the second pass is off-policy
    assert first["loss/clip_frac"] < second["loss/clip_frac"] and second["loss/clip_frac"] > 0.05
    assert abs(second["loss/ratio"] - 1.0) > 1e-3
    assert both["loss/clip_frac"] == pytest.approx((first["loss/clip_frac"] + second["loss/clip_frac"]) / 2)


def test_one_iteration_is_the_plain_update():
    cfg = load_config(None, TINY + ["optim.lr=0.05"])
    policy, batch, old = _batch(cfg)
    start = [p.detach().clone() for p in policy.parameters()]
    opt = torch.optim.SGD(policy.parameters(), lr=0.05)
    metrics = update_policy(policy, opt, batch, old, None, cfg)
    assert metrics["loss/ratio"] == pytest.approx(1.0, abs=1e-6) and metrics["loss/clip_frac"] == 0.0
    # the same single step by hand: GRPO at ratio 1 is -mean_b mean_t A_b * logp (its gradient), one SGD step
    with torch.no_grad():
        ref = random_model(cfg.policy, vocab_size=259)
        for p, v in zip(ref.parameters(), start):
            p.copy_(v)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    from trajkit.rl.batching import token_logprobs

    lp = token_logprobs(ref, batch, cfg.rollout.temperature)
    per_seq = (lp * batch.mask).sum(1) / batch.mask.sum(1)
    (-(per_seq * batch.advantages).mean()).backward()
    torch.nn.utils.clip_grad_norm_(ref.parameters(), cfg.optim.grad_clip)
    ref_opt.step()
    for p, r in zip(policy.parameters(), ref.parameters()):
        torch.testing.assert_close(p, r, rtol=1e-5, atol=1e-7)


def test_without_optimizer_state_the_checkpoint_holds_weights_and_resumes_with_a_fresh_optimizer(tiny, tmp_path):
    kept = Trainer(tiny(), logger=False)
    kept.step_once()
    with_state = read_trainer_state(tmp_path / kept.save(str(tmp_path / "kept")))
    assert with_state["optimizer"]["state"]  # AdamW moments for every parameter

    lean = Trainer(tiny("log.save_optimizer=false"), logger=False)
    lean.step_once()
    path = lean.save(str(tmp_path / "lean"))
    assert read_trainer_state(tmp_path / path)["optimizer"] is None
    with pytest.warns(UserWarning, match="log.save_optimizer=false; the optimiser starts afresh"):
        resumed = Trainer(tiny("log.save_optimizer=false", f"checkpoint.resume_from={path}"), logger=False)
    assert resumed.step == 1 and not resumed.state.side.optimizer.state
    for a, b in zip(resumed.state.side.policy.parameters(), lean.state.side.policy.parameters()):
        assert torch.equal(a, b)


def _fake_cache(root, name, tok):  # noqa: F811
    """The huggingface_hub cache layout: models--org--name/refs/main -> snapshots/<commit>/."""
    repo = root / ("models--" + name.replace("/", "--"))
    snapshot = repo / "snapshots" / "0123abcd"
    tiny_llama(tok).save_pretrained(str(snapshot))
    tok.save_pretrained(str(snapshot))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123abcd")
    return snapshot


def test_a_hub_name_is_read_from_the_local_cache(tok, tmp_path, monkeypatch):  # noqa: F811
    from trajkit.models.hub import resolve_hub_model

    snapshot = _fake_cache(tmp_path / "hub", "tiny-org/tiny-llama", tok)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_hub_model("tiny-org/tiny-llama") == str(snapshot)
    trainer = Trainer({"steps": 1, "rollout": {"group_size": 2, "prompts_per_step": 1, "max_new_tokens": 3},
                       "log": {"report_to": []}}, model="tiny-org/tiny-llama", logger=False,
                      train_dataset=[{"prompt": "hi"}], reward_funcs=lambda completions, **k: [1.0] * len(completions))
    assert trainer.cfg.policy.source == "hub"
    assert trainer.state.side.policy.config.hidden_size == 32 and len(trainer.state.tokenizer) == len(tok)
    trainer.step_once()
    with pytest.raises(ConfigError, match=r"'tiny-org/missing' is not in the local Hugging Face cache .*HF_HUB_OFFLINE "
                                          r"is set.*`hf download tiny-org/missing`"):
        resolve_hub_model("tiny-org/missing")


@pytest.mark.parametrize("shuffle", [False, True])
def test_task_shuffle(tmp_path, shuffle):
    from trajkit.models.tokenizer import byte_tokenizer
    from trajkit.envs.registry import make_task

    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"q{i}"}) + "\n" for i in range(10)))
    cfg = load_config(None, ["task.name=dataset", f"task.path={path}", f"task.shuffle={str(shuffle).lower()}"])
    task = make_task(cfg.task, 0, byte_tokenizer())
    order = [task.prompt(i).source for i in range(10)]
    assert sorted(order) == [f"q{i}" for i in range(10)]  # one epoch: every row once
    assert (order == [f"q{i}" for i in range(10)]) is (not shuffle)


def test_lr_schedules_match_transformers():
    from transformers import get_scheduler

    for name in ("linear", "cosine", "constant_with_warmup"):
        model = torch.nn.Linear(1, 1)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        sched = get_scheduler(name, opt, num_warmup_steps=2, num_training_steps=10)
        theirs = []
        for _ in range(10):
            theirs.append(opt.param_groups[0]["lr"])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                opt.step()
                sched.step()
        ours = [lr_factor(name.replace("_with_warmup", ""), 2, s, 10) for s in range(10)]
        assert ours == pytest.approx(theirs, abs=1e-12), name
