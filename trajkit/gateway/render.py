"""Request messages -> the prompt text the model sees, by the tokenizer's own chat template.

The template is probed once (:func:`trajkit.traces.export.template_probe.probe_template`) and the rendering chosen
as the SFT export chooses it (:func:`~trajkit.traces.export.template_probe.choose_rendering`):

- ``structured``: the template renders OpenAI fields itself (``tools``, assistant ``tool_calls`` and
  ``reasoning_content``, ``tool`` messages): trajkit's own template, Qwen-style templates;
- ``inline``: the template renders only ``content`` (SmolLM2's plain ChatML): the gateway writes the Hermes
  text into ``content``, in the one layout of :mod:`trajkit.traces.hermes_text` (tool schemas as the Hermes
  ``<tools>`` system prompt, an assistant turn as ``<think>\\n…\\n</think>\\n`` + content +
  ``\\n<tool_call>\\n{json}\\n</tool_call>`` per call, the results of one turn's calls as ONE tool turn of
  ``<tool_response>`` envelopes in the role the template keeps): the text a Hermes row of the same
  conversation holds.

``tool_choice="none"`` renders no tools; ``auto``, ``required`` and a named function render them all;
``required`` and a named function also force the start of the call after the prompt
(the tool-call format's ``forced``, :mod:`trajkit.gateway.formats`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trajkit.models.chat import render
from trajkit.traces.hermes_text import inline_messages, message_text
from trajkit.traces.export.template_probe import Rendering, choose_rendering, probe_template

__all__ = ["ChatRenderer", "hermes_assistant_text", "inline_messages"]


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
    """An assistant message as Hermes text (kept for importers: :func:`trajkit.traces.hermes_text.message_text`)."""
    return message_text(msg)
