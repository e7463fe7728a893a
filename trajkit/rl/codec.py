"""Byte-level token ids for the RL tasks: ids 0-255 are UTF-8 bytes, then three special tokens.

``<|endoftext|>`` (256, padding), ``<|im_end|>`` (257, end of turn: the stop token) and ``<|im_start|>``
(258) are single ids, so a ChatML turn boundary costs one token; everything else (``<tool_call>`` too)
is spelled in bytes. ``decode(encode(text)) == text`` for any text.

>>> c = ByteCodec()
>>> c.encode("hi<|im_end|>")
[104, 105, 257]
>>> c.decode([104, 105, 257])
'hi<|im_end|>'
"""
from __future__ import annotations

SPECIALS = ("<|endoftext|>", "<|im_end|>", "<|im_start|>")


class ByteCodec:
    """UTF-8 bytes plus :data:`SPECIALS`; ``eos_id`` ends a turn."""

    vocab_size = 256 + len(SPECIALS)
    pad_id = 256
    eos_id = 257
    bos_id = 258

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        pos = 0
        while pos < len(text):
            hit = min(((text.find(s, pos), i) for i, s in enumerate(SPECIALS) if text.find(s, pos) >= 0),
                      default=None)
            end = hit[0] if hit else len(text)
            out.extend(text[pos:end].encode("utf-8"))
            if hit is None:
                break
            out.append(256 + hit[1])
            pos = end + len(SPECIALS[hit[1]])
        return out

    def decode(self, ids: list[int]) -> str:
        from trajkit.engine.tokenizer import decode_bytes

        return decode_bytes(ids, SPECIALS)

    def strip_eos(self, ids: list[int]) -> list[int]:
        """``ids`` without a final end-of-turn token."""
        return ids[:-1] if ids and ids[-1] == self.eos_id else ids
