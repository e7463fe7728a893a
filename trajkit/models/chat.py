"""Rendering conversations with a tokenizer's own chat template: the one ChatML renderer in trajkit.

Nothing in trajkit writes ``<|im_start|>`` by hand: the tiny models' corpus, the RL prompts and the
tool-use environment's forced turns all come from ``tokenizer.apply_chat_template``, so a tiny model
and a real one go through the same code.

``continuation(tok, history, new)`` is the text a template adds when messages ``new`` follow ``history``:
the render of ``history + new`` minus the render of ``history``. It requires the template to be
append-only over that step (it is for ChatML; Qwen3-style templates that drop earlier reasoning are
not) and raises :class:`ConfigError` naming the first differing character otherwise.

>>> from trajkit.models.tokenizer import byte_tokenizer
>>> tok = byte_tokenizer()
>>> history = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
>>> continuation(tok, history, [{"role": "user", "content": "and 3+3?"}], add_generation_prompt=True)
'<|im_start|>user\\nand 3+3?<|im_end|>\\n<|im_start|>assistant\\n'
"""
from __future__ import annotations

from trajkit.errors import ConfigError


def render(tokenizer, messages: list[dict], tools: list[dict] | None = None,
           add_generation_prompt: bool = False) -> str:
    """``messages`` (OpenAI chat form) as text, by the tokenizer's chat template."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise ConfigError(f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has no chat template; "
                          "use a tokenizer that ships one (trajkit.models.tokenizer builds one)")
    return tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False,
                                         add_generation_prompt=add_generation_prompt)


END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")


def stop_token_ids(tokenizer) -> tuple[int, ...]:
    """The ids generation stops on: ``eos_token_id`` first, then the end-of-turn tokens of the common chat
    formats that the vocabulary has (ChatML ``<|im_end|>``, Llama-3 ``<|eot_id|>``, Gemma ``<end_of_turn>``,
    ...), so a model whose eos is ``<|endoftext|>`` still stops at the end of its turn."""
    ids: list[int] = []
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    for token in END_OF_TURN_TOKENS:  # per-token lookups: get_vocab() would copy the whole vocabulary
        i = tokenizer.convert_tokens_to_ids(token)
        if isinstance(i, int) and i not in ids and tokenizer.convert_ids_to_tokens(i) == token:
            ids.append(i)  # (an unknown token maps to the unk id, whose token differs)
    if not ids:
        raise ConfigError(f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has no eos token and none of "
                          f"the end-of-turn tokens {list(END_OF_TURN_TOKENS)}: generation could not stop")
    return tuple(ids)


def continuation(tokenizer, history: list[dict], new: list[dict], tools: list[dict] | None = None,
                 add_generation_prompt: bool = False, after_end_of_turn: bool = False) -> str:
    """The text the template appends for ``new`` after ``history`` (see the module docstring). With
    ``after_end_of_turn`` it starts right after the end-of-turn token of ``history``'s last message instead
    (``"\n"`` + the new turns for ChatML): the text forced after a sampled turn that stopped on that token."""
    before = render(tokenizer, history, tools)
    glue = _end_of_turn_glue(tokenizer, before) if after_end_of_turn else ""
    after = render(tokenizer, history + new, tools, add_generation_prompt)
    if not after.startswith(before):
        at = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), min(len(before), len(after)))
        raise ConfigError(f"chat template of {getattr(tokenizer, 'name_or_path', '')!r} rewrites the history "
                          f"when messages are appended (first difference at character {at}); trajkit needs an "
                          "append-only template here")
    return glue + after[len(before):]


def _end_of_turn_glue(tokenizer, text: str) -> str:
    """What a rendered conversation holds after its last end-of-turn token."""
    eos = tokenizer.eos_token
    if not eos or eos not in text:
        raise ConfigError(f"chat template of {getattr(tokenizer, 'name_or_path', '')!r}: the end-of-turn "
                          f"token {eos!r} does not appear in a rendered assistant turn")
    return text.rsplit(eos, 1)[1]
