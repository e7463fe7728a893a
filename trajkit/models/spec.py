"""Tiny Hugging Face causal LMs built from a shape (no download): random ones for tests, the RL policies
and the shapes of the shipped target/draft pair (:mod:`trajkit.recipes.tiny_pair`).

``init_scale`` multiplies the initialiser's standard deviation: the default HF init (0.02) gives almost
uniform next-token distributions, which make distribution tests weak; a larger scale gives peaked,
varied distributions like a trained model's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from trajkit.errors import ConfigError

Family = Literal["llama", "qwen2"]


@dataclass(frozen=True)
class TinySpec:
    """Shape of a tiny decoder-only LM."""

    vocab_size: int = 16
    hidden_size: int = 32
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 64
    max_positions: int = 512
    family: Family = "llama"

    def __post_init__(self) -> None:
        if self.family not in _FAMILIES:
            raise ConfigError(f"family must be one of {sorted(_FAMILIES)}, got {self.family!r}")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ConfigError("hidden_size must be divisible by num_heads, and num_heads by num_kv_heads")

    def config(self, init_std: float = 0.02):
        config_cls, _ = _FAMILIES[self.family]
        return config_cls(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                          intermediate_size=self.intermediate_size, num_hidden_layers=self.num_layers,
                          num_attention_heads=self.num_heads, num_key_value_heads=self.num_kv_heads,
                          max_position_embeddings=self.max_positions, initializer_range=init_std,
                          tie_word_embeddings=False, pad_token_id=None, bos_token_id=None,
                          eos_token_id=None)


_FAMILIES = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}


def build_model(spec: TinySpec, seed: int, init_scale: float = 1.0, dtype: torch.dtype = torch.float32):
    """A randomly initialised model of shape ``spec``, reproducible from ``seed`` (global RNG untouched)."""
    _, model_cls = _FAMILIES[spec.family]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(spec.config(init_std=0.02 * init_scale))
    return model.to(dtype).eval()


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())
