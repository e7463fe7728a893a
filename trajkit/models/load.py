"""The one loader of local Hugging Face folders (never a hub download): causal LMs and their tokenizers."""
from __future__ import annotations

from pathlib import Path

from trajkit.errors import InputError


def load_model(folder: str | Path, dtype=None, device=None, what: str = "model"):
    """``AutoModelForCausalLM`` from a local folder, in eval mode; ``InputError`` naming ``what`` (the
    config key or flag that gave the folder) when it cannot be loaded."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True,
                                                     dtype=dtype or torch.float32)
    except (OSError, ValueError) as exc:
        raise InputError(f"{what}: cannot load a local causal LM ({exc})", path=str(folder)) from exc
    return (model.to(device) if device is not None else model).eval()


def load_tokenizer(folder: str | Path, required: bool = True, what: str = "tokenizer"):
    """``AutoTokenizer`` from a local folder; None when absent and not ``required``."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as exc:
        if not required:
            return None
        raise InputError(f"{what}: cannot load a local tokenizer ({exc})", path=str(folder)) from exc
