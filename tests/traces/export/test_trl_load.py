"""Format (a), OpenAI messages JSONL with ``messages`` and ``tools`` columns, trains in TRL's SFTTrainer.

Three small conversations (reasoning, a tool call with JSON-string arguments, grouped tool responses,
an empty think block) are written as JSONL, loaded with ``datasets.load_dataset("json")`` and trained
for two steps on a tiny random LlamaForCausalLM with the local tiny tokenizer, with
``assistant_only_loss`` (the tiny template carries ``{% generation %}`` markers). Checked: the loss is
finite, every example is seen exactly once (TRL's token count equals the examples' total length), and
TRL's labels equal trajkit's prefix-rendered labels (format b) token for token.
"""
import json
import math

import pytest
import torch
from datasets import load_dataset
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
from trl import SFTConfig, SFTTrainer
from trl.chat_template_utils import is_chat_template_stop_token_trained

from trajkit.models.tokenizer import build_tokenizer
from trajkit.traces.export.tokenize import TokenizeConfig, tokenize_conversation

READ = {"type": "function", "function": {"name": "read_file", "description": "Read a file.", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
RUN = {"type": "function", "function": {"name": "terminal", "description": "Run a command.", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
    "required": ["command"]}}}


def call(call_id, name, args):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


ROWS = [
    {"messages": [
        {"role": "system", "content": "Be careful."},
        {"role": "user", "content": "Which port?"},
        {"role": "assistant", "reasoning_content": "Read the config.", "content": "",
         "tool_calls": [call("c0", "read_file", {"path": "a.yaml"}), call("c1", "read_file", {"path": "b.yaml"})]},
        {"role": "tool", "tool_call_id": "c0", "name": "read_file", "content": "port: 1"},
        {"role": "tool", "tool_call_id": "c1", "name": "read_file", "content": "port: 2"},
        {"role": "assistant", "content": "Ports 1 and 2."}], "tools": [READ]},
    {"messages": [
        {"role": "user", "content": "List files."},
        {"role": "assistant", "content": "Listing.", "tool_calls": [call("c2", "terminal", {"command": "ls",
                                                                                           "timeout": 5})]},
        {"role": "tool", "tool_call_id": "c2", "name": "terminal", "content": '{"output": "a b", "exit_code": 0}'},
        {"role": "assistant", "reasoning_content": "", "content": "Two files: a and b."}], "tools": [RUN]},
    {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"}],
     "tools": [READ, RUN]},
]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return AutoTokenizer.from_pretrained(build_tokenizer(tmp_path_factory.mktemp("tiny-tokenizer")))


def tiny_llama(tok):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    return LlamaForCausalLM(config)


def test_tiny_template_trains_the_stop_token_in_trl(tok):
    assert is_chat_template_stop_token_trained(tok)


@pytest.mark.parametrize("tools_as", ["list", "json_string"])
def test_openai_messages_jsonl_trains_in_sft_trainer(tok, tmp_path, tools_as):
    path = tmp_path / "sft.jsonl"
    with path.open("w") as f:
        for row in ROWS:
            tools = json.dumps(row["tools"]) if tools_as == "json_string" else row["tools"]
            f.write(json.dumps({"messages": row["messages"], "tools": tools}) + "\n")
    dataset = load_dataset("json", data_files=str(path), split="train")
    args = SFTConfig(output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=2,
                     assistant_only_loss=True, max_length=1024, logging_steps=1, save_strategy="no",
                     report_to=[], use_cpu=True, bf16=False, dataloader_num_workers=0, disable_tqdm=True,
                     seed=0)
    trainer = SFTTrainer(model=tiny_llama(tok), args=args, train_dataset=dataset, processing_class=tok)

    ours = [tokenize_conversation(tok, row["messages"], row["tools"], TokenizeConfig()) for row in ROWS]
    assert [len(examples) for examples in ours] == [1, 1, 1]
    assert len(trainer.train_dataset) == 3
    for k, [example] in enumerate(ours):
        assert trainer.train_dataset[k]["input_ids"] == example.input_ids
        assert trainer.train_dataset[k]["labels"] == example.labels

    trainer.train()
    steps = [log for log in trainer.state.log_history if "loss" in log]
    assert len(steps) == 2 and all(math.isfinite(log["loss"]) for log in steps)
    assert steps[-1]["num_tokens"] == sum(len(example.input_ids) for [example] in ours)
