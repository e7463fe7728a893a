"""Where a turn ends: the stop ids (and, failing those, stop text) the gateway samples with.

The ids are the union of the tokenizer's ``eos_token_id``, the model's ``generation_config.eos_token_id``
(an id or a list: Llama-3.1 lists ``<|end_of_text|>``, ``<|eom_id|>`` and ``<|eot_id|>``) and the chat
template's own end-of-turn marker: the text the template writes right after an assistant turn's content
(found by rendering one), when its first token is a special token of the vocabulary. A template whose
end-of-turn is not one token of the vocabulary (a Llama-3.1-style template over a tokenizer that lacks
``<|eot_id|>``) cannot be stopped by id: the marker's text becomes a stop string (the text is cut before it,
the recorded ids after the token that completes it, so the next prompt still extends them) and the plan
carries a warning, printed at start-up.

    >>> from trajkit.models.tokenizer import byte_tokenizer
    >>> stop_plan(byte_tokenizer()).describe(byte_tokenizer())
    "stop ids [258] ('<|im_end|>'; the template ends a turn with '<|im_end|>')"
"""
from __future__ import annotations

from dataclasses import dataclass

from trajkit.models.chat import render

PROBE_REPLY = "Zq9 probe reply"


@dataclass(frozen=True)
class StopPlan:
    ids: tuple[int, ...]
    end_of_turn: str | None  # the template's end-of-turn text (its first token when that is a special one)
    strings: tuple[str, ...] = ()  # stop text used where the end-of-turn is no single token
    warning: str | None = None

    def describe(self, tokenizer) -> str:
        names = ", ".join(repr(tokenizer.convert_ids_to_tokens(i)) for i in self.ids)
        how = f"the template ends a turn with {self.end_of_turn!r}" if self.end_of_turn else "no end-of-turn found"
        text = f"; stop text {list(self.strings)}" if self.strings else ""
        return f"stop ids {list(self.ids)} ({names}; {how}{text})"


def end_of_turn_text(tokenizer) -> str | None:
    """What the template writes after an assistant turn's content (``<|im_end|>\\n`` for ChatML)."""
    try:
        text = render(tokenizer, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": PROBE_REPLY}])
    except Exception:  # noqa: BLE001 - a template that cannot render the probe has no marker we can use
        return None
    after = text.rsplit(PROBE_REPLY, 1)[1] if PROBE_REPLY in text else ""
    return after or None


def _generation_eos(generation_config) -> list[int]:
    eos = getattr(generation_config, "eos_token_id", None) if generation_config is not None else None
    if eos is None:
        return []
    return [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])]


def stop_plan(tokenizer, generation_config=None) -> StopPlan:
    """The stop ids for ``tokenizer``'s template and the model's ``generation_config`` (module docstring)."""
    ids = [int(tokenizer.eos_token_id)] if tokenizer.eos_token_id is not None else []
    ids += [e for e in _generation_eos(generation_config) if e not in ids]
    after = end_of_turn_text(tokenizer)
    if after is None:
        return StopPlan(tuple(ids), None, warning=None if ids else "no eos id and no end-of-turn marker: "
                        "generation stops only at max_tokens")
    first = (tokenizer.encode(after, add_special_tokens=False) or [None])[0]
    if first is not None and first in set(tokenizer.all_special_ids):
        if first not in ids:
            ids.append(first)
        return StopPlan(tuple(ids), tokenizer.convert_ids_to_tokens(first))
    marker = after.strip() or after
    return StopPlan(tuple(ids), marker, (marker,), warning=(
        f"the chat template ends a turn with {marker!r}, which is not a special token of this vocabulary: "
        f"it is no stop id, so turns are cut at that text instead (use a tokenizer whose vocabulary has it)"))
