"""Chat templates written for the tests (no hub access): a Qwen3-style and a Llama-3.1-style tool template.

Qwen3-style, as the Qwen3 family behaves (written here from that behaviour, not copied):
- tools in the system turn inside ``<tools></tools>``, one JSON schema per line;
- assistant tool calls as ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`` blocks;
- consecutive ``tool`` messages in ONE user turn of ``<tool_response>`` blocks;
- reasoning (``reasoning_content``) rendered as ``<think>\\n...\\n</think>\\n\\n`` only for assistant turns
  after the last user message; for the LAST message an empty think block is written even without
  reasoning (so a turn renders differently once it is no longer last, as Qwen3's template does).
"""

QWEN3_STYLE = r"""
{%- set ns = namespace(last_query=-1) -%}
{%- for m in messages -%}{%- if m.role == "user" -%}{%- set ns.last_query = loop.index0 -%}{%- endif -%}{%- endfor -%}
{%- if tools -%}
{{- "<|im_start|>system\n" -}}
{%- if messages and messages[0].role == "system" -%}{{- messages[0].content + "\n\n" -}}{%- endif -%}
{{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n<tools>" -}}
{%- for tool in tools -%}{{- "\n" + (tool | tojson) -}}{%- endfor -%}
{{- "\n</tools>\n\nFor each function call, return a json object within <tool_call></tool_call> XML tags.<|im_end|>\n" -}}
{%- elif messages and messages[0].role == "system" -%}
{{- "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n" -}}
{%- endif -%}
{%- for m in messages -%}
{%- if m.role == "system" and loop.first -%}
{%- elif m.role == "user" -%}
{{- "<|im_start|>user\n" + m.content + "<|im_end|>\n" -}}
{%- elif m.role == "assistant" -%}
{%- set reasoning = m.reasoning_content if m.reasoning_content is string else "" -%}
{{- "<|im_start|>assistant\n" -}}
{%- if loop.index0 > ns.last_query and (loop.last or reasoning) -%}
{{- "<think>\n" + reasoning + "\n</think>\n\n" -}}
{%- endif -%}
{{- m.content or "" -}}
{%- if m.tool_calls -%}
{%- for call in m.tool_calls -%}
{%- set fn = call.function if call.function is defined else call -%}
{%- if not loop.first or m.content -%}{{- "\n" -}}{%- endif -%}
{{- "<tool_call>\n{\"name\": " + (fn.name | tojson) + ", \"arguments\": " -}}
{%- if fn.arguments is string -%}{{- fn.arguments -}}{%- else -%}{{- fn.arguments | tojson -}}{%- endif -%}
{{- "}\n</tool_call>" -}}
{%- endfor -%}
{%- endif -%}
{{- "<|im_end|>\n" -}}
{%- elif m.role == "tool" -%}
{%- if loop.first or messages[loop.index0 - 1].role != "tool" -%}{{- "<|im_start|>user" -}}{%- endif -%}
{{- "\n<tool_response>\n" + m.content + "\n</tool_response>" -}}
{%- if loop.last or messages[loop.index0 + 1].role != "tool" -%}{{- "<|im_end|>\n" -}}{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- "<|im_start|>assistant\n" -}}{%- endif -%}
""".strip()

# Llama-3.1-style, as that family lays a conversation out (written here from the layout, not copied):
# a header ``<|start_header_id|>ROLE<|end_header_id|>\n\n`` before each message, ``<|eot_id|>`` after it,
# tools as JSON objects in the system turn, each call as one bare JSON object ``{"name": ..., "parameters":
# ...}``, tool results in an ``ipython`` turn; reasoning (not a Llama field) as a leading think block.
LLAMA31_STYLE = r"""
{%- macro header(role) -%}{{- "<|start_header_id|>" + role + "<|end_header_id|>\n\n" -}}{%- endmacro -%}
{%- if tools or (messages and messages[0].role == "system") -%}
{{- header("system") -}}
{%- if messages and messages[0].role == "system" -%}{{- messages[0].content -}}{%- endif -%}
{%- if tools -%}
{{- "\n\nYou have access to the following functions. To call one, reply with a JSON object "
    "{\"name\": function name, \"parameters\": its arguments}.\n" -}}
{%- for tool in tools -%}{{- "\n" + (tool | tojson) -}}{%- endfor -%}
{%- endif -%}
{{- "<|eot_id|>" -}}
{%- endif -%}
{%- for m in messages -%}
{%- if m.role == "system" and loop.first -%}
{%- elif m.role == "user" -%}
{{- header("user") + m.content + "<|eot_id|>" -}}
{%- elif m.role == "assistant" -%}
{{- header("assistant") -}}
{%- if m.reasoning_content is string -%}{{- "<think>\n" + m.reasoning_content + "\n</think>\n\n" -}}{%- endif -%}
{{- m.content or "" -}}
{%- for call in m.tool_calls or [] -%}
{%- set fn = call.function if call.function is defined else call -%}
{%- if not loop.first or m.content -%}{{- "\n" -}}{%- endif -%}
{{- "{\"name\": " + (fn.name | tojson) + ", \"parameters\": " -}}
{%- if fn.arguments is string -%}{{- fn.arguments -}}{%- else -%}{{- fn.arguments | tojson -}}{%- endif -%}
{{- "}" -}}
{%- endfor -%}
{{- "<|eot_id|>" -}}
{%- elif m.role == "tool" -%}
{{- header("ipython") + m.content + "<|eot_id|>" -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- header("assistant") -}}{%- endif -%}
"""


def plain_header_tokenizer(texts, vocab_size: int = 1024):
    """A byte-level BPE (GPT-2 pre-tokenizer) trained on ``texts`` whose only added token is the eos
    ``<|eot_id|>``: the header markers, ``<think>`` and everything else are plain text, so the
    ``\n\n`` that ends a header merges with what follows it (``\n\n`` alone is one token)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=["<|eot_id|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    # texts ending in a blank line teach the merge of "\n\n" (GPT-2's regex keeps it whole only before the end)
    tok.train_from_iterator(list(texts) + ["A paragraph ends here.\n\n"] * 20000, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|eot_id|>", bos_token=None, unk_token=None,
                                   clean_up_tokenization_spaces=False, model_max_length=1 << 20)
    fast.chat_template = LLAMA31_STYLE
    return fast
