"""``trajkit generate`` on a random tiny model folder, and the tiny-pair recipe's plumbing (with a few
training steps; the real pair is never built in tests)."""
from __future__ import annotations

import json

import pytest
import torch

from trajkit.cli.main import main
from trajkit.errors import ConfigError
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import IM_END_ID, byte_tokenizer, save_tokenizer
from trajkit.recipes.tiny_pair import TinyPairConfig, assistant_prompts, load_tiny_pair

BYTES = byte_tokenizer()


def encode(text: str) -> list[int]:
    return BYTES.encode(text, add_special_tokens=False)

SPEC = TinySpec(vocab_size=264, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=64)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    for name, seed in (("target", 0), ("draft", 1)):
        build_model(SPEC, seed, init_scale=10.0).save_pretrained(root / name)
        save_tokenizer(BYTES, root / name)
    return root


def test_generate_cli_json(model_dirs, capsys):
    rc = main(["generate", "--model", str(model_dirs / "target"), "--draft", str(model_dirs / "draft"),
               "--k", "2", "--prompt", "hello", "--prompt-ids", "1,2,3", "--max-new-tokens", "8",
               "--temperature", "0", "--json"])
    assert rc == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    rows, stats = lines[:-1], lines[-1]["stats"]
    assert len(rows) == 2 and all(len(r["token_ids"]) <= 8 for r in rows)
    assert stats["num_draft_tokens"] == 2 and stats["new_tokens"] == sum(len(r["token_ids"]) for r in rows)
    # greedy CLI output equals the library's greedy output for the same prompt
    from transformers import AutoModelForCausalLM

    from trajkit.engine import Engine, SamplingParams

    target = AutoModelForCausalLM.from_pretrained(model_dirs / "target")
    ref = Engine(target).generate([[1, 2, 3]], SamplingParams(temperature=0, max_new_tokens=8,
                                                              stop_token_ids=[IM_END_ID]))
    assert rows[0]["token_ids"] == ref[0].token_ids


def test_generate_cli_errors(model_dirs, capsys):
    assert main(["generate", "--model", str(model_dirs / "target"), "--drafter", "ngram", "--k", "0",
                 "--prompt", "x"]) == 2
    assert "num_draft_tokens" in capsys.readouterr().err
    assert main(["generate", "--model", str(model_dirs / "target"), "--top-p", "2", "--prompt", "x"]) == 2
    assert "top_p" in capsys.readouterr().err
    assert main(["generate", "--model", str(model_dirs / "nowhere"), "--prompt", "x"]) == 2


def test_tiny_pair_plumbing(tmp_path):
    """A two-step build: files, loading, prompts ending with the assistant header, the cache hit."""
    config = TinyPairConfig(seed=3, corpus="stdlib", corpus_bytes=200_000,
                            target=TinySpec(vocab_size=264, hidden_size=16, num_layers=1, num_heads=2,
                                            num_kv_heads=1, intermediate_size=32),
                            draft=TinySpec(vocab_size=264, hidden_size=16, num_layers=1, num_heads=2,
                                           num_kv_heads=1, intermediate_size=32),
                            seq_len=32, pretrain_steps=2, distill_steps=2, sample_rows=2, sample_tokens=4)
    with pytest.raises(ConfigError, match="build-tiny"):
        load_tiny_pair(config, cache=tmp_path, build=False)
    pair = load_tiny_pair(config, cache=tmp_path, log=lambda m: None)
    assert pair.meta["corpus_source"] == "stdlib" and pair.meta["config"]["seed"] == 3
    assert (pair.path / "target" / "tokenizer.json").exists() and (pair.path / "draft" / "config.json").exists()
    again = load_tiny_pair(config, cache=tmp_path, build=False)
    assert again.path == pair.path
    torch.testing.assert_close(again.target.lm_head.weight, pair.target.lm_head.weight)


def test_assistant_prompts():
    header = encode("<|im_start|>assistant\n")
    ids = encode("<|im_start|>user\nhello there<|im_end|>\n") + header + encode("ok<|im_end|>")
    end = len(ids) - 3  # the header ends before "ok<|im_end|>"
    assert assistant_prompts(ids, 20, limit=1) == [ids[end - 20:end]]
    filled = assistant_prompts(ids, 20, limit=4)  # one header only: evenly spaced windows fill the rest
    assert filled[0] == ids[end - 20:end] and len(filled) == 4 and all(len(p) == 20 for p in filled)
