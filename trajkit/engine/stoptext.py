"""Stop strings at generation: a row ends at the token that completes one of its stop strings' text.

A stop string may span several tokens (``"\\n\\nUser:"`` is four SmolLM2 tokens), and text is not a
function of single tokens (byte-level tokens split characters; SentencePiece decoders drop a leading space),
so a row's stop is found on decoded text: the row ends at the first ``k`` such that a stop string occurs in
``decode(generated[:k])``, and token ``k - 1`` is its last (the stop text is inside the returned ids, as a
stop id is). This is the reference :func:`first_completing` computes on a whole sequence; the engine's
:class:`StopText` finds the same ``k`` incrementally, as tokens arrive, so no token is sampled past it (the
same rule as vLLM's ``stop``, which also trims the tokens a speculative step sampled past the stop).

Incremental check: after each new token, only a window of the last ``W = max UTF-8 bytes of a stop string +
4`` tokens is decoded. A stop string first completed by token ``k - 1`` lies within the text of its last
``B`` tokens (every ordinary token holds at least one byte; a special token's text is longer than one), so
the window holds it with at least four tokens to spare before it: enough that a character split across byte
tokens at the window's start, or a decoder's dropped leading space, cannot touch it. The per-token cost is
one decode of ``W`` tokens, independent of the row's length.

    >>> from trajkit.models.tokenizer import byte_tokenizer
    >>> tok = byte_tokenizer()
    >>> ids = tok.encode("ab\\n\\nUser: hi", add_special_tokens=False)
    >>> first_completing(ids, ("\\n\\nUser:",), tok.decode)
    9
    >>> StopText(("\\n\\nUser:",), tok.decode).first_stop(ids[:5], ids[5:])
    3
"""
from __future__ import annotations

from typing import Callable, Sequence

Decode = Callable[[list[int]], str]

WINDOW_MARGIN = 4  # tokens decoded before a stop string's earliest possible first token (module docstring)


def first_completing(tokens: Sequence[int], strings: Sequence[str], decode: Decode) -> int | None:
    """The reference: how many of ``tokens`` a row keeps (the first ``k`` with a stop string in
    ``decode(tokens[:k])``), or None when none appears. Decodes every prefix: for tests and short rows."""
    tokens = list(tokens)
    if not strings or not any(s in decode(tokens) for s in strings):
        return None
    return next(k for k in range(1, len(tokens) + 1) if any(s in decode(tokens[:k]) for s in strings))


class StopText:
    """One row's stop strings and the tokenizer's ``decode``, checked as the row's tokens arrive."""

    def __init__(self, strings: Sequence[str], decode: Decode):
        assert strings and all(strings), strings
        self.strings = tuple(strings)
        self.decode = decode
        self.window = max(len(s.encode("utf-8")) for s in self.strings) + WINDOW_MARGIN

    def first_stop(self, before: list[int], new: list[int]) -> int | None:
        """The index in ``new`` of the token that completes a stop string (after ``before``, the row's
        tokens so far, in which none has appeared), or None."""
        seq = list(before) + list(new)
        for j in range(len(new)):
            end = len(before) + j + 1
            text = self.decode(seq[max(0, end - self.window):end])
            if any(s in text for s in self.strings):
                return j
        return None
