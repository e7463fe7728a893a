"""RL on the real SmolLM2-135M-Instruct with its real tokenizer and chat template (prepared offline):
chat prompts rendered by its template, generation stopping at ``<|im_end|>``, Hermes tool turns written
inline (its template has no tool support), forced tool tokens masked, one training step each."""
import json

import pytest
import torch

from trajkit.engine import Completion, SamplingParams
from trajkit.models.load import load_tokenizer
from trajkit.rl.config import load_config
from trajkit.envs.sample import validate_sample
from trajkit.envs.toolenv import (
    CALCULATOR,
    CalculatorTask,
    hermes_tools_system,
    save_episodes,
)
from trajkit.rl.trainer import Trainer

SMALL = ["threads=2", "rollout.prompts_per_step=1", "rollout.group_size=2", "optim.micro_batch_size=2",
         "log.report_to=[]", "eval.every=0", "steps=1", "optim.lr=1e-5"]


@pytest.fixture(scope="module")
def tok(smollm2_folder):
    return load_tokenizer(smollm2_folder)


def test_tool_episode_is_written_inline_for_a_template_without_tools(tok, tmp_path, capsys):
    task = CalculatorTask(seed=0, tokenizer=tok, max_turns=3)
    assert (task.env.fmt.mode, task.env.fmt.tool_role) == ("inline", "tool")
    prompt = task.prompt(0)
    expr = prompt.meta["question"][len("What is "):-1]
    call = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "%s"}}\n</tool_call>' % expr
    turns = iter([call, prompt.answer])

    def scripted(prompt_ids, params):
        ids = tok.encode(next(turns), add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
        return [Completion(ids, [-0.5] * len(ids), "stop")]

    sample = task.env.rollout(scripted, [prompt], SamplingParams())[0]
    validate_sample(sample)
    # the whole episode is exactly SmolLM2's template over the inline Hermes conversation
    result = json.dumps({"name": "calculator", "content": prompt.answer})
    chat = [{"role": "system", "content": hermes_tools_system([CALCULATOR], "You may call tools.")},
            {"role": "user", "content": prompt.meta["question"]}, {"role": "assistant", "content": call},
            {"role": "tool", "content": f"<tool_response>\n{result}\n</tool_response>"},
            {"role": "assistant", "content": prompt.answer}]
    whole = tok.apply_chat_template(chat, tokenize=False)
    assert tok.decode(sample.prompt_ids + sample.completion_ids) == whole.rstrip("\n")
    # forced tokens (mask 0) are exactly the tool turn and its glue; sampled ones the two assistant turns
    forced = tok.decode([t for t, m in zip(sample.completion_ids, sample.loss_mask) if m == 0])
    assert forced == f"\n<|im_start|>tool\n<tool_response>\n{result}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    assert sample.metadata["finish_reason"] == "answer"
    path = tmp_path / "episodes.jsonl"
    save_episodes([sample], str(path))
    from trajkit.cli.main import main

    capsys.readouterr()
    assert main(["traces", "stats", str(path), "--json", "--quiet"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["traces"] == 1 and stats["tool_calls"] == 1


def _changed(before, model):
    return sum(not torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_one_grpo_step_on_the_chat_arithmetic_task(smollm2_folder, tok, tmp_path):
    cfg = load_config("grpo_smollm2", SMALL + ["rollout.max_new_tokens=12", f"log.out_dir={tmp_path}"])
    trainer = Trainer(cfg, model=smollm2_folder, logger=False)
    before = {k: v.clone() for k, v in trainer.state.side.policy.state_dict().items()}
    prompt = trainer.state.task.prompt(0)
    assert prompt.ids == tok.apply_chat_template(prompt.source, add_generation_prompt=True, tokenize=True,
                                                 return_dict=False)
    result = trainer.step_once()
    end = tok.convert_tokens_to_ids("<|im_end|>")
    for s in result.samples:
        validate_sample(s)
        assert end not in s.completion_ids[:-1]
        assert s.metadata["finish_reason"] == ("stop" if s.completion_ids[-1] == end else "length")
    assert result.metrics["mismatch/mean_abs"] < 0.05  # engine and trainer agree on the real model
    assert result.metrics["reward/raw"] == result.metrics["reward/final_number_correct"]
    if any(s.advantage for s in result.samples):
        assert _changed(before, trainer.state.side.policy) > 0


def test_one_tool_use_step_on_the_real_model(smollm2_folder, tmp_path):
    cfg = load_config("grpo_smollm2", SMALL + ["task.name=calculator", "task.max_len=2", "task.max_turns=2",
                                               "rollout.max_new_tokens=10", f"log.out_dir={tmp_path}"])
    result = Trainer(cfg, logger=False).step_once()
    assert len(result.samples) == 2
    for s in result.samples:
        validate_sample(s)
        assert s.metadata["prompt"][0]["content"].startswith("You may call tools.\n\nYou are a function calling")
