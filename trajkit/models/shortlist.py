"""A causal LM over a *shortlist* of its tokenizer's vocabulary: a cheap draft for a large-vocabulary target.

A draft for SmolLM2 (49,152 tokens, hidden size 576) that kept the full output layer would spend 28M of
its multiply-adds per token there, a fifth of the whole target; most of those logits are for tokens that
English text almost never uses. :class:`ShortlistLM` runs an ordinary Hugging Face causal LM (``inner``)
whose vocabulary is the ``K`` most frequent token ids plus one out-of-shortlist slot, and presents it to
the world with the full vocabulary:

- input ids are mapped to local ids (an id outside the shortlist becomes the out-of-shortlist slot);
- output logits are scattered back into a full-width tensor whose other entries are ``NEG`` (-1e4), so the
  draft's probability of every token outside the shortlist is exactly 0 in float32 (``exp(-1e4)``
  underflows).

Speculative decoding stays lossless: the verifier accepts a drafted token ``x`` with ``min(1, p(x)/q(x))``
and resamples a rejection from ``max(p - q, 0)``, which holds every out-of-shortlist token with its full
target mass ``p(v)``; a draft distribution with zeros is still a distribution (FR-Spec, Zhao et al. 2025,
uses a frequency-ranked shortlist the same way).

Training the draft uses :meth:`local_logits` and the teacher's log-probs *gathered at* :attr:`ids`: the
restricted cross-entropy ``-sum_{v in S} p(v) log q(v)`` is minimised by ``q = p|S / p(S)``, the best a
shortlist draft can do. (The full-width logits would not do: their constant ``NEG`` entries give a loss
without a minimum.)
"""
from __future__ import annotations

import inspect
import json
from pathlib import Path

import torch
from transformers.modeling_outputs import CausalLMOutputWithPast

NEG = -1.0e4
SHORTLIST_FILE = "shortlist.json"


class ShortlistLM(torch.nn.Module):
    """``inner`` (vocabulary ``len(ids) + 1``, the last slot out-of-shortlist) seen with ``vocab_size``."""

    def __init__(self, inner, ids: list[int], vocab_size: int):
        super().__init__()
        if inner.config.vocab_size != len(ids) + 1:
            raise ValueError(f"inner model has {inner.config.vocab_size} logits; the shortlist needs "
                             f"{len(ids) + 1} ({len(ids)} ids + 1 out-of-shortlist slot)")
        if len(set(ids)) != len(ids) or min(ids) < 0 or max(ids) >= vocab_size:
            raise ValueError(f"shortlist ids must be distinct and in [0, {vocab_size})")
        self.inner = inner
        self.full_vocab_size = vocab_size
        self.register_buffer("ids", torch.tensor(ids, dtype=torch.long), persistent=False)
        to_local = torch.full((vocab_size,), len(ids), dtype=torch.long)
        to_local[self.ids] = torch.arange(len(ids))
        self.register_buffer("to_local", to_local, persistent=False)
        params = inspect.signature(inner.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    @property
    def config(self):
        return self.inner.config

    def local_logits(self, input_ids: torch.Tensor, **kwargs) -> torch.Tensor:
        """Logits over the shortlist ``[..., K]`` (the out-of-shortlist slot dropped)."""
        return self.inner(input_ids=self.to_local[input_ids], **kwargs).logits[..., :-1]

    def forward(self, input_ids: torch.Tensor, attention_mask=None, position_ids=None, cache=None,
                use_cache=None, logits_to_keep: int = 0, **kwargs) -> CausalLMOutputWithPast:
        if cache is not None:  # transformers 5 renamed past_key_values to cache; pass it as the inner model wants
            kwargs[self._cache_kw] = cache
        out = self.inner(input_ids=self.to_local[input_ids], attention_mask=attention_mask,
                         position_ids=position_ids, use_cache=use_cache, logits_to_keep=logits_to_keep, **kwargs)
        local = out.logits[..., :-1]
        full = local.new_full((*local.shape[:-1], self.full_vocab_size), NEG)
        full.index_copy_(-1, self.ids, local)
        return CausalLMOutputWithPast(logits=full, past_key_values=out.past_key_values)

    def teacher_logp(self, logp: torch.Tensor) -> torch.Tensor:
        """A teacher's full-vocabulary log-probs ``[..., V]`` at the shortlist ``[..., K]``."""
        return logp[..., self.ids]

    def save_pretrained(self, folder: str | Path) -> None:
        """``folder``: the inner model (a Hugging Face folder) and ``shortlist.json``."""
        folder = Path(folder)
        self.inner.save_pretrained(str(folder))
        (folder / SHORTLIST_FILE).write_text(json.dumps({"ids": self.ids.tolist(),
                                                         "vocab_size": self.full_vocab_size}))

    @classmethod
    def from_pretrained(cls, folder: str | Path) -> ShortlistLM:
        from trajkit.models.load import load_model

        meta = json.loads((Path(folder) / SHORTLIST_FILE).read_text())
        return cls(load_model(folder, what="draft"), meta["ids"], meta["vocab_size"])


def is_shortlist_folder(folder: str | Path) -> bool:
    return (Path(folder) / SHORTLIST_FILE).exists()
