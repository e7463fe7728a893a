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


def _config(folder, what: str, rope_scaling, required: bool):
    """The folder's model config with ``rope_scaling`` written in; None when not ``required`` and no scaling
    is asked for (``from_pretrained`` then reads it itself)."""
    from transformers import AutoConfig

    from trajkit.models.rope import apply_rope_scaling

    scaled = rope_scaling is not None and rope_scaling.active
    if not (required or scaled):
        return None
    try:
        config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise InputError(f"{what}: cannot load a local causal LM ({_one_line(exc)})", path=str(folder)) from exc
    if scaled:
        apply_rope_scaling(config, rope_scaling)  # a conflicting scaling: its own ConfigError
    return config


def empty_model(folder: str | Path, what: str = "model", rope_scaling=None):
    """The causal LM :func:`load_model` would load from ``folder``, built on the meta device: the same
    modules (tied weights tied), float32, no storage and no values (a sharded rank fills in its shard,
    :func:`trajkit.rl.fsdp.load_from_rank0`); in train mode."""
    import torch
    from transformers import AutoModelForCausalLM

    config = _config(folder, what, rope_scaling, required=True)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def load_model(folder: str | Path, dtype=None, device=None, what: str = "model", rope_scaling=None):
    """``AutoModelForCausalLM`` from a local folder, in eval mode; ``InputError`` naming ``what`` (the
    config key or flag that gave the folder) when it cannot be loaded. ``rope_scaling``
    (:class:`trajkit.models.rope.RopeScaling`) is written into the model's config before it is built."""
    import torch
    from transformers import AutoModelForCausalLM

    config = _config(folder, what, rope_scaling, required=False)
    extra = {"config": config} if config is not None else {}
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
