"""Where the policy runs and in what precision: ``policy.device``, ``policy.dtype``.

``policy.device`` is ``auto`` (the first CUDA device when there is one, else the CPU), ``cpu``, ``cuda``
or ``cuda:N``. Everything of a run lives there: the trained policy and its optimiser state, the frozen
reference, the draft, the engine's inference copies and the collated batch.

``policy.dtype`` is *mixed* precision, as Hugging Face's ``Trainer(bf16=True)`` and TRL's GRPO mean it:

- the trained policy keeps float32 master weights and float32 AdamW moments (a bfloat16 weight rounds away any
  change below ~2^-9 of itself, e.g. an AdamW step of ``lr`` 1e-6 on a weight of 0.02);
- its forward passes in the ``logprob`` and ``policy_update`` stages run under ``torch.autocast`` in
  ``dtype`` (matmuls in low precision; log-softmax and the loss in float32);
- the engine's inference copy is *stored* in ``dtype`` (``weight_sync`` casts the float32 weights), like a
  vLLM rollout worker serving bfloat16 weights. The engine and the trainer then compute slightly different
  log-probs: the train/rollout mismatch that ``loss.tis`` corrects and ``mismatch/*`` measures.

``float16`` also scales the loss (``torch.amp.GradScaler``: float16 gradients underflow without it) and is
accepted on CUDA only; ``bfloat16`` on the CPU and on CUDA devices that support it. Deviation: the
GradScaler's running scale is not saved in checkpoints, so a resumed float16 run is not bitwise exact
(bitwise resume is a CPU, float32/bfloat16 guarantee).
"""
from __future__ import annotations

import contextlib
import re

import torch

from trajkit.errors import ConfigError

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


def resolve_device(name: str, what: str = "policy.device") -> torch.device:
    """``auto|cpu|cuda|cuda:N`` -> a ``torch.device`` present on this machine, else :class:`ConfigError`."""
    if not isinstance(name, str) or not DEVICE_PATTERN.match(name):
        raise ConfigError(f"{what} must be auto, cpu, cuda or cuda:N, got {name!r}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"{what}={name}: this machine has no CUDA device (torch {torch.__version__}, "
                              f"CUDA build: {torch.version.cuda or 'none'}); set {what}=cpu or auto")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ConfigError(f"{what}={name}: this machine has {count} CUDA device(s) (cuda:0..cuda:{count - 1})")
    return device


def check_dtype(dtype: str, device: torch.device, what: str = "policy.dtype") -> torch.dtype:
    """The ``torch.dtype`` for ``dtype`` if ``device`` supports training in it, else :class:`ConfigError`."""
    if dtype not in DTYPES:
        raise ConfigError(f"{what} must be one of {sorted(DTYPES)}, got {dtype!r}")
    if dtype == "float16" and device.type != "cuda":
        raise ConfigError(f"{what}=float16 needs a CUDA device (float16 autocast and loss scaling are CUDA "
                          f"features); on {device.type} use bfloat16 or float32")
    if dtype == "bfloat16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError(f"{what}=bfloat16: {torch.cuda.get_device_name(device)} has no bfloat16 support; "
                          "use float16 or float32")
    return DTYPES[dtype]


def model_device(model) -> torch.device:
    return next(model.parameters()).device


def autocast(device: torch.device, dtype: torch.dtype):
    """``torch.autocast`` in ``dtype`` on ``device``'s type; a no-op context for float32."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def grad_scaler(device: torch.device, dtype: torch.dtype):
    """A dynamic loss scaler for float16 training, else None (bfloat16 and float32 need none)."""
    if dtype != torch.float16:
        return None
    return torch.amp.GradScaler(device.type)
