"""The Python API (``Trainer(model=..., train_dataset=..., reward_funcs=...)``), import-path tasks and
rewards, registered losses, ``--print-config`` and packaged configs."""
import contextlib
import io
import math
import textwrap

import pytest
import yaml
from datasets import Dataset

from tests.rl.conftest import TINY
from trajkit.cli.main import main
from trajkit.errors import ConfigError
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.rl import losses
from trajkit.rl.config import load_config, packaged_configs, to_dict
from trajkit.rl.trainer import Trainer

TOK = byte_tokenizer()


def tiny_config(tmp_path, **sections):
    cfg = {"threads": 1, "steps": 2, "rollout": {"prompts_per_step": 2, "group_size": 4, "max_new_tokens": 6},
           "optim": {"micro_batch_size": 8}, "log": {"out_dir": str(tmp_path / "run"), "report_to": []},
           "task": {"eval_fraction": 0.25}, "eval": {"every": 2, "num_prompts": 64}}
    cfg.update(sections)
    return cfg


def even_share(completion_ids, **kwargs):
    """Fraction of even token ids: differs within a group, so steps have signal."""
    return [sum(t % 2 == 0 for t in ids) / max(len(ids), 1) for ids in completion_ids]


def says_answer(completions, answer, **kwargs):
    return [float(a in c[0]["content"]) for c, a in zip(completions, answer)]


def test_trainer_from_a_module_a_dataset_and_reward_functions(tmp_path):
    model = build_model(TinySpec(vocab_size=len(TOK), hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=2,
                                 intermediate_size=64, max_positions=512), seed=0)
    rows = [{"prompt": [{"role": "user", "content": f"say {i}"}], "answer": str(i)} for i in range(12)]
    trainer = Trainer(tiny_config(tmp_path), model=model, tokenizer=TOK, train_dataset=Dataset.from_list(rows),
                      reward_funcs=[even_share, says_answer], reward_weights=[1.0, 3.0])
    history = trainer.train()
    assert [h["step"] for h in history] == [0, 1, 2]
    step = history[-1]
    # the logged total is the weighted sum of the logged per-function means (every reward scores every row)
    assert step["reward/raw"] == pytest.approx(step["reward/even_share"] + 3.0 * step["reward/says_answer"])
    assert 0.0 <= step["reward/even_share"] <= 1.0
    # a group of G = 4 repeats one prompt: it is prefilled once, the other three rows copy its states
    assert step["gen/shared_prompt_tokens"] == 3 * step["gen/prefill_tokens"] > 0
    assert step["gen/prompt_tokens"] == 4 * step["gen/prefill_tokens"] and step["gen/prefill_reuse_rate"] == 0.75
    # eval runs on the held-out quarter of the rows only (3 of 12), whatever eval.num_prompts says
    assert trainer.state.task.num_prompts("eval") == 3 and not math.isnan(history[0]["eval/reward"])
    held = {r["answer"] for r in trainer.state.task.eval_rows}
    assert not held & {r["answer"] for r in trainer.state.task.train_rows}


def test_chat_prompts_are_rendered_with_the_template_and_stop_at_end_of_turn(tmp_path):
    rows = [{"prompt": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]}] * 4
    trainer = Trainer(tiny_config(tmp_path, policy={"source": "random", "hidden_size": 32, "num_layers": 1,
                                                    "num_heads": 2, "intermediate_size": 64}),
                      train_dataset=rows, reward_funcs=even_share)
    result = trainer.step_once()
    want = TOK.apply_chat_template(rows[0]["prompt"], tokenize=False, add_generation_prompt=True)
    for s in result.samples:
        assert TOK.decode(s.prompt_ids) == want
        assert all(t not in (256, 258) for t in s.completion_ids[:-1])  # generation stops at the first end of turn
        assert s.metadata["completion"][0]["role"] == "assistant"


def test_tasks_and_rewards_by_import_path(tmp_path, monkeypatch):
    (tmp_path / "mytasks.py").write_text(textwrap.dedent('''
        from trajkit.envs.single_turn import StringTask

        def make_task(cfg, seed, tokenizer):
            task = StringTask("rev", seed, tokenizer, 2, 3)
            task.name = "my-rev"
            return task

        def length(completions, **kwargs):
            return [float(len(c)) for c in completions]
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = load_config(None, [*TINY, f"log.out_dir={tmp_path / 'run'}", "task.name=mytasks:make_task",
                             "rewards=[mytasks:length]", "reward_weights=[0.5]"])
    trainer = Trainer(cfg, logger=False)
    assert trainer.state.task.name == "my-rev" and trainer.state.rewards.names == ["length"]
    result = trainer.step_once()
    texts = [s.metadata["completion"] for s in result.samples]
    assert result.metrics["reward/raw"] == pytest.approx(0.5 * sum(len(t) for t in texts) / len(texts))
    with pytest.raises(ConfigError, match=r"rewards\[0\]: cannot import module 'nope'"):
        Trainer(load_config(None, [*TINY, "rewards=[nope:f]"]), logger=False)
    with pytest.raises(ConfigError, match=r"rewards\[0\]: 'plain' is not an import path"):
        load_config(None, ["rewards=[plain]"])
    with pytest.raises(ConfigError, match="has no attribute 'missing'"):
        Trainer(load_config(None, [*TINY, "task.name=mytasks:missing"]), logger=False)


def test_a_registered_loss_is_accepted(monkeypatch):
    with pytest.raises(ConfigError, match=r"loss.name must be one of \[.*'grpo'.*\], got 'mine'"):
        load_config(None, ["loss.name=mine"])
    monkeypatch.setitem(losses.LOSSES, "mine", losses.LOSSES["grpo"])
    assert load_config(None, ["loss.name=mine"]).loss.name == "mine"


def _yaml_without_comments(text):
    return yaml.safe_load("\n".join(line.split("  # default")[0] for line in text.splitlines()))


def test_print_config_lists_every_key_and_round_trips():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["train", "--print-config", "optim.lr=0.5", "task.name=arith"]) == 0
    text = out.getvalue()
    assert "lr: 0.5  # default: 1.0e-06" in text
    assert _yaml_without_comments(text) == to_dict(load_config(None, ["optim.lr=0.5", "task.name=arith"]))


def test_packaged_configs_load_by_name():
    shipped = packaged_configs()
    assert {"rep", "grpo_smollm2"} <= set(shipped)
    from trajkit.trainers.sft import is_sft_config, load_sft_config

    sft = {name for name in shipped if is_sft_config(name)}
    assert sft == {"sft_harbor_smollm2"}  # `trainer: sft` configs load as SFTConfig, the rest as TrainConfig
    for name, path in shipped.items():
        if name in sft:
            assert load_sft_config(name) == load_sft_config(path)
        else:
            assert to_dict(load_config(name)) == to_dict(load_config(path))
    with pytest.raises(ConfigError, match="not a packaged config"):
        load_config("no_such_config")
