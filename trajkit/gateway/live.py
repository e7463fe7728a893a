"""Live text of a streaming choice: which prefix of the decoded tokens can be sent before the choice ends.

Token deltas are sent as text, and text sent cannot be taken back, so a delta is sent only when it is
certain to be a prefix of the choice's final text (the ``content`` the non-streaming response would give):

- the decode of the sampled ids so far, the stop token left out, a trailing incomplete UTF-8 character
  (``\\ufffd``) held back;
- cut before the first stop string; while none has appeared, the last ``len(longest stop) - 1``
  characters are held back (they may begin one);
- for chat: only the text before the first character that may open a block (``<`` for a ``<think>`` or
  ``<tool_call>``, ``{`` in the Llama JSON format; the tool-call format's ``holds``): blocks are parsed
  when the choice ends and sent then as ``reasoning_content`` /
  ``tool_calls`` deltas; trailing whitespace is held back (the newline before a call is layout), and
  nothing at all when the text starts with whitespace (held back to the end: a conservative rule).

Whatever is held back is sent with the final chunks, as the rest of the parsed ``content``.
"""
from __future__ import annotations

from collections.abc import Callable


class LiveText:
    """Feed a choice's new token ids with :meth:`push`; it returns the new text that is safe to send."""

    def __init__(self, decode: Callable[[list[int]], str], stop: list[str], stop_ids: tuple[int, ...], blocks: str):
        """``blocks``: the characters at which a block may start (the tool-call format's ``holds``; "" = none)."""
        self.decode, self.stop, self.stop_ids, self.blocks = decode, list(stop), frozenset(stop_ids), blocks
        self.hold = max((len(s) for s in self.stop), default=1) - 1
        self.ids: list[int] = []
        self.sent = ""
        self.closed = False  # nothing more is sent live (a stop string or a block appeared)

    def push(self, ids: list[int]) -> str:
        self.ids += [t for t in ids if t not in self.stop_ids]
        if self.closed:
            return ""
        safe = self._safe(self.decode(self.ids))
        if not safe.startswith(self.sent) or len(safe) <= len(self.sent):
            return ""
        delta, self.sent = safe[len(self.sent):], safe
        return delta

    def _safe(self, text: str) -> str:
        text = text.rstrip("\ufffd")
        cut = min((i for i in (text.find(s) for s in self.stop) if i >= 0), default=-1)
        if cut >= 0:
            text, self.closed = text[:cut], True
        elif self.hold:
            text = text[:max(0, len(text) - self.hold)]
        if not self.blocks:
            return text
        at = min((i for i in (text.find(c) for c in self.blocks) if i >= 0), default=-1)
        if at >= 0:
            text, self.closed = text[:at], True
        if text[:1].isspace():
            self.closed = True
            return ""
        return text.rstrip()


def rest(final: str | None, sent: str) -> str:
    """What remains of ``final`` after the live ``sent`` prefix (``final`` starts with it by construction)."""
    final = final or ""
    assert final.startswith(sent), (final, sent)
    return final[len(sent):]
