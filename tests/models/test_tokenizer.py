"""The one tokenizer type: byte ids equal the UTF-8 bytes of the text (the reference), specials are single
ids, both vocabularies round-trip any text, and the saved folders load with ``AutoTokenizer``."""
from __future__ import annotations

import random

import pytest
from transformers import AutoTokenizer

from trajkit.models.tokenizer import (
    BYTE_VOCAB_SIZE,
    IM_END_ID,
    IM_START_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    bpe_tokenizer,
    byte_tokenizer,
    save_tokenizer,
)


def random_texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    alphabet = "ab \n{}\":<>/|_é漢🙂\t\\" + "".join(map(chr, range(0x20, 0x7f)))
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(n)]


def test_byte_ids_are_the_utf8_bytes():
    tok = byte_tokenizer()
    for text in random_texts(200):
        text = text.replace("<|", "< |")  # no special strings: then the ids are exactly the bytes
        assert tok.encode(text, add_special_tokens=False) == list(text.encode("utf-8")), text
    assert len(tok) == BYTE_VOCAB_SIZE


def test_specials_are_single_ids_and_round_trip():
    tok = byte_tokenizer()
    text = "<|im_start|>user\nhé 🙂 {\"a\": 1}<|im_end|>\n<|endoftext|>"
    ids = tok.encode(text, add_special_tokens=False)
    assert ids[0] == IM_START_ID and ids[-3] == IM_END_ID and ids[-1] == PAD_ID
    assert ids[1:5] == list(b"user")
    assert tok.decode(ids) == text
    assert (tok.eos_token, tok.pad_token) == (SPECIAL_TOKENS[2], SPECIAL_TOKENS[0])


@pytest.mark.parametrize("build", [byte_tokenizer, lambda: bpe_tokenizer(vocab_size=400)])
def test_any_text_round_trips_and_the_saved_folder_loads(build, tmp_path):
    tok = build()
    loaded = AutoTokenizer.from_pretrained(save_tokenizer(tok, tmp_path), local_files_only=True)
    for text in random_texts(100, seed=1):
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.decode(ids) == text
        assert loaded.encode(text, add_special_tokens=False) == ids
    assert loaded.chat_template == tok.chat_template


def test_one_template_renders_tools_and_the_tool_role():
    tok = byte_tokenizer()
    tools = [{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}]
    text = tok.apply_chat_template(
        [{"role": "user", "content": "2*3?"},
         {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "calc", "arguments": {"e": "2*3"}}}]},
         {"role": "tool", "content": "6"}], tools=tools, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\n# Tools")
    assert '<tool_call>\n{"name": "calc", "arguments": {"e": "2*3"}}\n</tool_call><|im_end|>\n' in text
    assert text.endswith("<|im_start|>user\n<tool_response>\n6\n</tool_response><|im_end|>\n"
                         "<|im_start|>assistant\n")
