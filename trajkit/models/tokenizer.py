"""trajkit's one tokenizer type: a byte-level Hugging Face ``PreTrainedTokenizerFast`` with ChatML
specials and a ChatML tool-calling chat template, built offline.

Two vocabularies, one builder and one template:

- ``byte_tokenizer()``: no merges, token id == byte value (0-255), then the three specials
  ``<|endoftext|>`` (256, pad), ``<|im_start|>`` (257), ``<|im_end|>`` (258, eos). The shipped tiny models
  (the engine's target/draft pair, the RL policies) use it; ``<think>``/``<tool_call>`` are spelled in bytes.
- ``bpe_tokenizer(texts, vocab_size)``: byte-level BPE (GPT-2 byte alphabet + the GPT-2 pre-tokenizer
  regex) trained with the ``tokenizers`` library on a small built-in text (or yours), plus the added,
  non-special tokens ``<think>``, ``</think>``, ``<tool_call>``, ``</tool_call>``, ``<tool_response>``,
  ``</tool_response>`` as in Qwen2.5/Qwen3. The SFT export tests use it: merges make token boundaries
  realistic.

Because every byte has a token and nothing is normalised, ``decode(encode(text)) == text`` for any
Unicode text in both, which lets the SFT mask checks compare decoded tokens with rendered text exactly.
Both save as a standard ``tokenizer.json`` + ``tokenizer_config.json``, so
``AutoTokenizer.from_pretrained(folder)`` loads them offline, beside the models they belong to.

The chat template (:data:`CHAT_TEMPLATE`) is our own ChatML tool template modelled on the Qwen2.5/Qwen3
layout, but it renders history verbatim (it does NOT strip earlier reasoning, unlike Qwen3):

- tools are listed in the system turn inside ``<tools></tools>``, one JSON object per line;
- assistant ``reasoning_content`` renders as ``<think>\\n{reasoning}\\n</think>\\n\\n`` (an empty string
  gives an empty think block; a missing key gives none);
- each assistant tool call renders as ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>``,
  joined by newlines; ``arguments`` given as a JSON string is written verbatim, a dict via ``tojson``;
- consecutive ``tool`` messages are grouped into ONE user turn of ``<tool_response>`` blocks;
- ``add_generation_prompt`` appends ``<|im_start|>assistant\\n``;
- the assistant body (everything after ``<|im_start|>assistant\\n``, through ``<|im_end|>\\n``) is
  wrapped in ``{% generation %}`` markers, so ``return_assistant_tokens_mask`` and TRL's
  ``assistant_only_loss`` work, and the end-of-turn token is trained.

Example::

    >>> tok = byte_tokenizer()
    >>> tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    '<|im_start|>user\\nhi<|im_end|>\\n'
    >>> tok.encode("hi<|im_end|>", add_special_tokens=False)
    [104, 105, 258]
"""
from __future__ import annotations

import os
from collections.abc import Iterable

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
PAD_ID, IM_START_ID, IM_END_ID = 256, 257, 258  # in the byte vocabulary
BYTE_VOCAB_SIZE = 259
ADDED_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
DEFAULT_VOCAB_SIZE = 1024

# Literal text goes through {{- "..." }} so Jinja whitespace control cannot change it.
CHAT_TEMPLATE = r"""
{%- macro text(value) -%}
{%- if value is none -%}
{%- elif value is string -%}{{- value -}}
{%- elif value is mapping -%}{{- value | tojson -}}
{%- elif value is iterable -%}
{%- for part in value -%}
{%- if part is mapping and part.text is defined -%}{{- part.text -}}{%- elif part is string -%}{{- part -}}{%- endif -%}
{%- endfor -%}
{%- else -%}{{- value | string -}}
{%- endif -%}
{%- endmacro -%}
{%- set first_is_system = messages | length > 0 and messages[0].role == "system" -%}
{%- if tools -%}
{{- "<|im_start|>system\n" -}}
{%- if first_is_system -%}{{- text(messages[0].content) + "\n\n" -}}{%- endif -%}
{{- "# Tools\n\nYou can call the functions below. Their JSON schemas are inside <tools></tools>:\n<tools>" -}}
{%- for tool in tools -%}{{- "\n" + (tool | tojson) -}}{%- endfor -%}
{{- "\n</tools>\n\nTo call a function, write one JSON object per call inside <tool_call></tool_call> tags:\n" -}}
{{- "<tool_call>\n{\"name\": <function name>, \"arguments\": <arguments as a JSON object>}\n</tool_call><|im_end|>\n" -}}
{%- elif first_is_system -%}
{{- "<|im_start|>system\n" + text(messages[0].content) + "<|im_end|>\n" -}}
{%- endif -%}
{%- for message in messages -%}
{%- if message.role == "system" and loop.first -%}
{%- elif message.role == "assistant" -%}
{{- "<|im_start|>assistant\n" -}}
{%- generation -%}
{%- if message.reasoning_content is defined and message.reasoning_content is string -%}
{{- "<think>\n" + message.reasoning_content + "\n</think>\n\n" -}}
{%- endif -%}
{%- set body = text(message.content) -%}
{{- body -}}
{%- if message.tool_calls is defined and message.tool_calls -%}
{%- for call in message.tool_calls -%}
{%- set fn = call.function if call.function is defined else call -%}
{%- if not loop.first or body -%}{{- "\n" -}}{%- endif -%}
{{- "<tool_call>\n{\"name\": " + (fn.name | tojson) + ", \"arguments\": " -}}
{%- if fn.arguments is string -%}{{- fn.arguments -}}{%- else -%}{{- fn.arguments | tojson -}}{%- endif -%}
{{- "}\n</tool_call>" -}}
{%- endfor -%}
{%- endif -%}
{{- "<|im_end|>\n" -}}
{%- endgeneration -%}
{%- elif message.role == "tool" -%}
{%- if loop.first or messages[loop.index0 - 1].role != "tool" -%}{{- "<|im_start|>user" -}}{%- endif -%}
{{- "\n<tool_response>\n" + text(message.content) + "\n</tool_response>" -}}
{%- if loop.last or messages[loop.index0 + 1].role != "tool" -%}{{- "<|im_end|>\n" -}}{%- endif -%}
{%- else -%}
{{- "<|im_start|>" + message.role + "\n" + text(message.content) + "<|im_end|>\n" -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- "<|im_start|>assistant\n" -}}{%- endif -%}
""".strip()

# Training text for the merges: chat-formatted prose, JSON and tool traffic, so that common pieces
# ("\n</", '{"name": ', "assistant\n") become single tokens and boundary effects are realistic.
_BUILTIN_TEXT = """\
<|im_start|>system
You are a helpful agent. You can read files, run terminal commands, search the web and keep notes.
Think step by step before acting, and explain what you found in plain words.<|im_end|>
<|im_start|>user
Find the deployment config for the staging environment and tell me which port it uses.<|im_end|>
<|im_start|>assistant
<think>
The user wants the staging deployment config. I should search past sessions and the repository.
Let me run two searches in parallel: one for "staging" and one for "deploy".
</think>

I will search the repository and the notes at the same time.
<tool_call>
{"name": "terminal", "arguments": {"command": "grep -rn staging deploy/ | head -20"}}
</tool_call>
<tool_call>
{"name": "read_file", "arguments": {"path": "deploy/staging.yaml", "offset": 0, "limit": 200}}
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
{"output": "deploy/staging.yaml:3: port: 8080\\ndeploy/staging.yaml:7: replicas: 2", "exit_code": 0, "error": null}
</tool_response>
<tool_response>
{"content": "service: api\\nenv: staging\\nport: 8080\\nreplicas: 2\\n", "success": true}
</tool_response><|im_end|>
<|im_start|>assistant
<think>
Both results agree: the staging service listens on port 8080 with two replicas.
</think>

The staging deployment (deploy/staging.yaml) runs the api service on port 8080 with 2 replicas.<|im_end|>
"""

_BUILTIN_PROSE = """\
The quick brown fox jumps over the lazy dog. A function call returns a result, and the result may be an
error: the file was not found, the command timed out, or the output was truncated. When a tool fails,
a careful agent reads the error message, changes its plan and tries a different action. Numbers such as
0, 1, 2, 3, 10, 42, 100, 2048 and 8080 appear often in logs, paths like /home/user/project/src/main.py
and URLs like https://example.com/docs?page=2 too. {"type": "function", "function": {"name": "web_search",
"description": "Search the web", "parameters": {"type": "object", "properties": {"query": {"type":
"string"}}, "required": ["query"]}}}


def parse(path):
    with open(path) as f:
        for line in f:
            if line.strip():
                yield line


class Config:
    # settings live here

    def __init__(self, size=8):
        self.size = size
"""


def builtin_corpus() -> list[str]:
    """The built-in training texts (a few KiB of chat, JSON and prose)."""
    return [_BUILTIN_TEXT, _BUILTIN_PROSE] * 4


def train_tokenizer(corpus_texts: Iterable[str] | None = None, vocab_size: int = DEFAULT_VOCAB_SIZE):
    """Train and return a ``tokenizers.Tokenizer`` (byte-level BPE, our special and added tokens)."""
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        trainers,
    )

    if vocab_size < 256 + len(SPECIAL_TOKENS) + len(ADDED_TOKENS):
        raise ValueError(f"vocab_size must be at least {256 + len(SPECIAL_TOKENS) + len(ADDED_TOKENS)} "
                         f"(256 bytes + special and added tokens), got {vocab_size}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(ADDED_TOKENS), min_frequency=2, show_progress=False,
        special_tokens=list(SPECIAL_TOKENS), initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    texts = list(corpus_texts) if corpus_texts is not None else builtin_corpus()
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    return tok


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for every byte (the alphabet of byte-level BPE)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, chars)))


def _wrap(tok):
    """A ``tokenizers.Tokenizer`` -> ``PreTrainedTokenizerFast`` with our specials and chat template."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None,
        bos_token=None, additional_special_tokens=["<|im_start|>"], clean_up_tokenization_spaces=False,
        model_max_length=1 << 20)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def byte_tokenizer():
    """The byte vocabulary (id == byte value, then :data:`SPECIAL_TOKENS` at 256-258) as a
    ``PreTrainedTokenizerFast`` with :data:`CHAT_TEMPLATE`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    byte_chars = _bytes_to_unicode()
    tok = Tokenizer(models.BPE(vocab={byte_chars[b]: b for b in range(256)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    fast = _wrap(tok)
    assert fast.convert_tokens_to_ids(list(SPECIAL_TOKENS)) == [PAD_ID, IM_START_ID, IM_END_ID]
    return fast


def bpe_tokenizer(corpus_texts: Iterable[str] | None = None, vocab_size: int = DEFAULT_VOCAB_SIZE):
    """A trained byte-level BPE vocabulary (see :func:`train_tokenizer`) with :data:`CHAT_TEMPLATE`."""
    return _wrap(train_tokenizer(corpus_texts, vocab_size))


def save_tokenizer(tokenizer, out_dir: str | os.PathLike) -> str:
    """Save where ``AutoTokenizer.from_pretrained(out_dir)`` loads it; returns ``str(out_dir)``."""
    out = str(out_dir)
    os.makedirs(out, exist_ok=True)
    tokenizer.save_pretrained(out)
    return out


def build_tokenizer(out_dir: str | os.PathLike, corpus_texts: Iterable[str] | None = None,
                    vocab_size: int = DEFAULT_VOCAB_SIZE) -> str:
    """Build the BPE tokenizer and save it to ``out_dir`` (fully offline); returns ``str(out_dir)``."""
    return save_tokenizer(bpe_tokenizer(corpus_texts, vocab_size), out_dir)
