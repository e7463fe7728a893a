"""Request messages -> the prompt text the model sees, by the tokenizer's own chat template.

The template is probed once (:func:`trajkit.traces.template_probe.probe_template`) and the rendering chosen
as the SFT export chooses it (:func:`~trajkit.traces.template_probe.choose_rendering`):

- ``structured``: the template renders OpenAI fields itself (``tools``, assistant ``tool_calls`` and
  ``reasoning_content``, ``tool`` messages): trajkit's own template, Qwen-style templates;
- ``inline``: the template renders only ``content`` (SmolLM2's plain ChatML): the gateway writes the Hermes
  text into ``content`` (tool schemas as the Hermes ``<tools>`` system block, an assistant turn as
  ``<think>\\n…\\n</think>\\n\\n`` + content + ``\\n<tool_call>\\n{json}\\n</tool_call>`` per call, tool results as
  ``<tool_response>`` text in the role the template keeps).

``tool_choice="none"`` renders no tools; ``auto``, ``required`` and a named function render them all;
``required`` and a named function also force the start of the call after the prompt
(the tool-call format's ``forced``, :mod:`trajkit.gateway.formats`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from trajkit.models.chat import render
from trajkit.traces.template_probe import (
    Rendering,
    choose_rendering,
    hermes_tools_system,
    probe_template,
)


@dataclass
class ChatRenderer:
    """Renders validated request messages for one tokenizer (see the module docstring)."""

    tokenizer: Any
    rendering: Rendering

    @classmethod
    def for_tokenizer(cls, tokenizer) -> ChatRenderer:
        return cls(tokenizer, choose_rendering(probe_template(tokenizer)))

    def text(self, messages: list[dict], tools: list[dict] | None, generation: bool = True) -> str:
        """The prompt text, with the generation prompt (``<|im_start|>assistant\\n`` for ChatML) unless
        ``generation`` is false (a conversation that ends with an assistant turn)."""
        if self.rendering.mode == "structured":
            return render(self.tokenizer, messages, tools or None, add_generation_prompt=generation)
        return render(self.tokenizer, inline_messages(messages, tools, self.rendering.tool_role),
                      None, add_generation_prompt=generation)


def hermes_assistant_text(msg: dict) -> str:
    """An assistant message as the Hermes text trajkit's template renders (the canonical layout)."""
    out = ""
    reasoning = msg.get("reasoning_content")
    if isinstance(reasoning, str):
        out += "<think>\n" + reasoning + "\n</think>\n\n"
    body = msg.get("content") or ""
    out += body
    for i, call in enumerate(msg.get("tool_calls") or []):
        fn = call["function"]
        args = fn["arguments"] if isinstance(fn["arguments"], str) else json.dumps(fn["arguments"])
        if i or body:
            out += "\n"
        out += "<tool_call>\n{\"name\": " + json.dumps(fn["name"]) + ", \"arguments\": " + args + "}\n</tool_call>"
    return out


def inline_messages(messages: list[dict], tools: list[dict] | None, tool_role: str) -> list[dict]:
    """``messages`` with everything written into ``content`` as Hermes text (for content-only templates)."""
    out: list[dict] = []
    for m in messages:
        if m["role"] == "assistant":
            out.append({"role": "assistant", "content": hermes_assistant_text(m)})
        elif m["role"] == "tool":
            out.append({"role": tool_role, "content": f"<tool_response>\n{m.get('content') or ''}\n</tool_response>"})
        else:
            out.append({"role": m["role"], "content": m.get("content") or ""})
    if tools:
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": hermes_tools_system(tools, out[0]["content"])}
        else:
            out.insert(0, {"role": "system", "content": hermes_tools_system(tools)})
    return out
