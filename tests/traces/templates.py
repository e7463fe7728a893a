"""Chat templates written for the tests (no hub access): a Qwen3-style tool template.

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
