"""TRL's ``GRPOConfig`` runs in trajkit: each mapped field against the trajkit key docs/rl.md names, TRL's
defaults carried over, and every field without an equivalent refused by name."""
import pytest
import torch

from tests.traces.export.test_trl_load import tiny_llama, tok  # noqa: F401  (tok: the tiny tokenizer fixture)
from trajkit.errors import ConfigError
from trajkit.rl.trl_config import from_trl

trl = pytest.importorskip("trl")
CPU = {"use_cpu": True} if not torch.cuda.is_available() else {}  # TRL itself refuses bf16 without a GPU otherwise


def test_trl_defaults_carry_over(tmp_path):
    from trl import GRPOConfig

    cfg = from_trl(GRPOConfig(output_dir=str(tmp_path), **CPU), num_prompts=20)
    # TRL 1.16's defaults: dapo, epsilon 0.2 and epsilon_high unset (so 0.2 both sides), lr 1e-6 linear,
    # 8 generations of 512 tokens, one prompt per step (generation batch 8), 3 epochs, bf16, beta 0, seed 42
    assert (cfg.loss.name, cfg.loss.clip_low, cfg.loss.clip_high, cfg.loss.scale_rewards) == ("dapo", 0.2, 0.2, "group")
    assert (cfg.loss.kl_coef, cfg.loss.kl_ratio) == (0.0, True)
    assert (cfg.optim.lr, cfg.optim.lr_schedule, cfg.optim.warmup_steps) == (1e-6, "linear", 0)
    assert (cfg.optim.beta1, cfg.optim.beta2, cfg.optim.weight_decay, cfg.optim.grad_clip) == (0.9, 0.999, 0.0, 1.0)
    assert (cfg.optim.minibatches, cfg.optim.micro_batch_size, cfg.optim.num_iterations) == (1, 8, 1)
    assert cfg.optim.gradient_checkpointing is True
    assert (cfg.rollout.group_size, cfg.rollout.prompts_per_step, cfg.rollout.max_new_tokens) == (8, 1, 512)
    assert cfg.rollout.temperature == 1.0 and cfg.steps == 60 and cfg.seed == 42  # ceil(3 * 20 / 1)
    assert (cfg.policy.dtype, cfg.task.shuffle, cfg.log.save_optimizer) == ("bfloat16", True, True)
    assert (cfg.log.out_dir, cfg.checkpoint.every, cfg.eval.every, cfg.log.report_to) == (str(tmp_path), 500, 0, [])


def test_every_mapped_field_lands_on_its_trajkit_key(tmp_path):
    settings = dict(output_dir=str(tmp_path / "o"), learning_rate=1e-5, lr_scheduler_type="cosine", warmup_steps=2,
                    weight_decay=0.01, adam_beta1=0.8, adam_beta2=0.95, adam_epsilon=1e-6, max_grad_norm=0.5, seed=3,
                    per_device_train_batch_size=4, gradient_accumulation_steps=2, steps_per_generation=4,
                    num_generations=4, max_completion_length=64, temperature=0.7, beta=0.04,
                    use_bias_correction_kl=False, epsilon=0.1, epsilon_high=0.3, loss_type="grpo",
                    scale_rewards="batch", num_iterations=2, shuffle_dataset=False, max_steps=8, bf16=False,
                    save_only_model=True, save_strategy="no", eval_strategy="steps", eval_steps=2,
                    report_to=["tensorboard"], gradient_checkpointing=False, reward_weights=[1.0, 0.5],
                    logging_steps=1, disable_tqdm=True, **CPU)
    cfg = from_trl(settings)
    # generation batch = 4 rows x 4 steps = 16 = 4 prompts x 4; 4 / 2 = 2 optimiser steps per generation x 2
    # iterations = 4 per RL step, so max_steps 8 = 2 RL steps
    assert (cfg.rollout.prompts_per_step, cfg.rollout.group_size, cfg.optim.minibatches) == (4, 4, 2)
    assert (cfg.optim.micro_batch_size, cfg.optim.num_iterations, cfg.steps) == (4, 2, 2)
    assert (cfg.optim.lr, cfg.optim.lr_schedule, cfg.optim.warmup_steps) == (1e-5, "cosine", 2)
    assert (cfg.optim.weight_decay, cfg.optim.beta1, cfg.optim.beta2, cfg.optim.grad_clip) == (0.01, 0.8, 0.95, 0.5)
    assert cfg.optim.eps == 1e-6
    assert (cfg.loss.name, cfg.loss.clip_low, cfg.loss.clip_high) == ("grpo", 0.1, 0.3)
    assert (cfg.loss.kl_coef, cfg.loss.kl_ratio, cfg.loss.scale_rewards) == (0.04, False, "batch")
    assert (cfg.rollout.max_new_tokens, cfg.rollout.temperature, cfg.seed) == (64, 0.7, 3)
    assert (cfg.task.shuffle, cfg.log.save_optimizer, cfg.checkpoint.every, cfg.eval.every) == (False, False, 0, 2)
    assert cfg.policy.dtype == "float32" and cfg.log.report_to == ["tensorboard"]
    assert cfg.reward_weights == [1.0, 0.5] and cfg.optim.gradient_checkpointing is False
    # a dict means GRPOConfig(**dict): the same config either way
    from trl import GRPOConfig

    assert from_trl(GRPOConfig(**settings)) == cfg


@pytest.mark.parametrize("settings, message", [
    ({"top_k": 5}, "top_k=5 has no trajkit equivalent"),
    ({"use_vllm": True}, "use_vllm=True has no trajkit equivalent"),
    ({"mask_truncated_completions": True}, "mask_truncated_completions=True has no trajkit equivalent"),
    ({"loss_type": "bnpo"}, "loss_type='bnpo' with importance_sampling_level='token' has no trajkit loss"),
    ({"loss_type": "dapo", "importance_sampling_level": "sequence"}, "loss_type='dapo' with importance_sampling"),
    ({"lr_scheduler_type": "polynomial"}, "lr_scheduler_type='polynomial'"),
    ({"optim": "sgd"}, "optim='sgd'"),
    ({"max_steps": 3, "steps_per_generation": 2}, "max_steps=3 optimiser steps is not a multiple of the 2"),
    ({"learning_rte": 1e-5}, "learning_rte"),
])
def test_unmappable_fields_are_refused_by_name(tmp_path, settings, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        from_trl({"output_dir": str(tmp_path), "max_steps": 4, **CPU, **settings})


def test_epochs_need_the_dataset_size(tmp_path):
    with pytest.raises(ConfigError, match="num_train_epochs needs the dataset's size"):
        from_trl({"output_dir": str(tmp_path), **CPU})


def reward_len(completions, **kwargs):  # TRL's quick-start reward (docs/source/quickstart.md, TRL 0.14-0.19)
    return [-abs(20 - len(completion)) for completion in completions]


def test_trl_docs_example_runs_in_trajkit_unchanged_but_the_model_path(tok, tmp_path):  # noqa: F811
    """TRL's quick start: ``GRPOConfig(output_dir="Qwen2-0.5B-GRPO", logging_steps=10)`` with ``reward_len``,
    as ``Trainer(model=..., reward_funcs=reward_len, args=training_args, train_dataset=dataset)``; the model
    is a tiny local folder, the dataset two local prompts (the docs' trl-lib/tldr is not fetched)."""
    from datasets import Dataset
    from trl import GRPOConfig

    from trajkit.rl import Trainer

    folder = tmp_path / "tiny"
    tiny_llama(tok).save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    dataset = Dataset.from_list([{"prompt": "TL;DR: the cat sat."}, {"prompt": "TL;DR: rain all day."}])
    training_args = GRPOConfig(output_dir=str(tmp_path / "Qwen2-0.5B-GRPO"), logging_steps=10, **CPU)
    trainer = Trainer(model=str(folder), reward_funcs=reward_len, args=training_args, train_dataset=dataset)
    cfg = trainer.cfg
    assert cfg.steps == 6 and cfg.rollout.max_new_tokens == 512 and cfg.policy.source == "path"
    history = trainer.train()
    assert [h["step"] for h in history] == [1, 2, 3, 4, 5, 6]
    assert all(h["gen/tokens"] > 0 for h in history)
    factors = [h["optim/lr_factor"] for h in history]  # TRL's linear decay over the 6 steps
    assert factors == pytest.approx([1, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6])
    assert (tmp_path / "Qwen2-0.5B-GRPO" / "checkpoints" / "step_000006" / "policy" / "config.json").exists()
