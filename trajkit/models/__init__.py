"""trajkit.models: the one place for tokenizers and models.

- :mod:`~trajkit.models.tokenizer`: the byte and BPE tokenizers (one ``PreTrainedTokenizerFast`` type with
  ChatML specials and a tool-calling chat template), built offline;
- :mod:`~trajkit.models.spec`: ``TinySpec`` and ``build_model`` (random Llama/Qwen2 models of a shape);
- :mod:`~trajkit.models.load`: the one loader of local Hugging Face folders;
- :mod:`~trajkit.models.chat`: rendering with a tokenizer's chat template;
- :mod:`~trajkit.models.fit`: the one supervised training loop and soft cross-entropy.

Recipes that build and cache models (the tiny pair, RL warm starts) live in :mod:`trajkit.recipes`.
"""

from trajkit._lazy import lazy_getattr

_EXPORTS = {
    "byte_tokenizer": "trajkit.models.tokenizer",
    "bpe_tokenizer": "trajkit.models.tokenizer",
    "build_tokenizer": "trajkit.models.tokenizer",
    "save_tokenizer": "trajkit.models.tokenizer",
    "TinySpec": "trajkit.models.spec",
    "build_model": "trajkit.models.spec",
    "parameter_count": "trajkit.models.spec",
    "load_model": "trajkit.models.load",
    "load_tokenizer": "trajkit.models.load",
    "render": "trajkit.models.chat",
    "continuation": "trajkit.models.chat",
    "fit": "trajkit.models.fit",
    "Schedule": "trajkit.models.fit",
    "soft_cross_entropy": "trajkit.models.fit",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
