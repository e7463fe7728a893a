"""The byte tokenizer of the shipped tiny models: token id = byte value, plus three ChatML specials.

Ids 0-255 are the bytes of the UTF-8 text (so any text round-trips), 256 ``<|endoftext|>`` (padding /
document separator), 257 ``<|im_start|>``, 258 ``<|im_end|>`` (end of turn; the stop token). Built with
the ``tokenizers`` library as a byte-level BPE with no merges and saved as a standard
``tokenizer.json``, so ``AutoTokenizer.from_pretrained(model_dir)`` loads it offline. A 259-entry
vocabulary keeps the output head small next to the transformer layers.
"""
from __future__ import annotations

import re
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
PAD_ID, IM_START_ID, IM_END_ID = 256, 257, 258
VOCAB_SIZE = 259
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in SPECIALS) + ")")


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


def build_byte_tokenizer():
    """A ``PreTrainedTokenizerFast``-compatible tokenizer with id == byte value."""
    from transformers import PreTrainedTokenizerFast

    byte_chars = _bytes_to_unicode()
    tok = Tokenizer(models.BPE(vocab={byte_chars[b]: b for b in range(256)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(SPECIALS))
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=SPECIALS[0], eos_token=SPECIALS[2])
    assert hf.convert_tokens_to_ids(list(SPECIALS)) == [PAD_ID, IM_START_ID, IM_END_ID]
    return hf


def save_byte_tokenizer(folder: str | Path) -> Path:
    folder = Path(folder)
    build_byte_tokenizer().save_pretrained(folder)
    return folder


def encode(text: str, specials: bool = True) -> list[int]:
    """UTF-8 bytes of ``text``; with ``specials``, the three special strings become their single ids."""
    if not specials:
        return list(text.encode("utf-8"))
    ids: list[int] = []
    for i, piece in enumerate(_SPECIAL_RE.split(text)):
        if i % 2:
            ids.append(PAD_ID + SPECIALS.index(piece))
        elif piece:
            ids.extend(piece.encode("utf-8"))
    return ids


def decode(ids: list[int]) -> str:
    """Bytes back to text; specials rendered by name, invalid UTF-8 replaced."""
    return decode_bytes(ids, SPECIALS)


def decode_bytes(ids: list[int], specials: tuple[str, ...]) -> str:
    """Ids 0-255 as UTF-8 bytes (invalid sequences replaced), id 256+i as ``specials[i]``."""
    out, buf = [], bytearray()
    for t in ids:
        if t < 256:
            buf.append(t)
            continue
        out.append(buf.decode("utf-8", errors="replace"))
        buf = bytearray()
        out.append(specials[t - 256] if t - 256 < len(specials) else f"<|{t}|>")
    out.append(buf.decode("utf-8", errors="replace"))
    return "".join(out)
