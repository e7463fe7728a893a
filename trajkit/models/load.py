"""The one loader of local Hugging Face folders (never a hub download): causal LMs and their tokenizers."""
from __future__ import annotations

from pathlib import Path

from trajkit.errors import ConfigError, InputError


def local_folder(spec: str, what: str = "--tokenizer") -> str:
    """``spec`` when it is a local folder; otherwise a :class:`ConfigError` that says so, and for a hub name
    (``org/name``) how to fetch it: trajkit never downloads, online or offline (``HF_HUB_OFFLINE``)."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return str(path)
    if path.exists():
        raise ConfigError(f"{what} {spec!r} is a file; pass the folder holding tokenizer.json")
    parts = spec.split("/")
    if len(parts) == 2 and all(parts) and not spec.startswith((".", "~")):
        raise ConfigError(f"{what} {spec!r} looks like a hub name; trajkit reads local folders only (online or "
                          f"with HF_HUB_OFFLINE): fetch it first, e.g. `hf download {spec} --local-dir ./tok`, "
                          "and pass ./tok")
    raise ConfigError(f"{what} {spec!r} is not a local folder; pass a folder holding tokenizer.json")


def load_model(folder: str | Path, dtype=None, device=None, what: str = "model", rope_scaling=None):
    """``AutoModelForCausalLM`` from a local folder, in eval mode; ``InputError`` naming ``what`` (the
    config key or flag that gave the folder) when it cannot be loaded. ``rope_scaling``
    (:class:`trajkit.models.rope.RopeScaling`) is written into the model's config before it is built."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from trajkit.models.rope import apply_rope_scaling

    extra = {}
    try:
        if rope_scaling is not None and rope_scaling.active:
            extra["config"] = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise InputError(f"{what}: cannot load a local causal LM ({_one_line(exc)})", path=str(folder)) from exc
    if extra:
        apply_rope_scaling(extra["config"], rope_scaling)  # a conflicting scaling: its own ConfigError
    try:
        model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True,
                                                     dtype=dtype or torch.float32, **extra)
    except (OSError, ValueError) as exc:
        raise InputError(f"{what}: cannot load a local causal LM ({_one_line(exc)})", path=str(folder)) from exc
    return (model.to(device) if device is not None else model).eval()


def load_tokenizer(folder: str | Path, required: bool = True, what: str = "tokenizer"):
    """``AutoTokenizer`` from a local folder; None when absent and not ``required``."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as exc:
        if not required:
            return None
        raise InputError(f"{what}: cannot load a local tokenizer ({_one_line(exc)})", path=str(folder)) from exc


def _one_line(exc: Exception) -> str:
    """transformers' messages span lines; the CLI prints one."""
    return " ".join(str(exc).split())
