"""Moving small per-row results between the device and the host with as few synchronisations as possible.

Every device-to-host read (``.tolist()``, ``int(t)``, ``bool(t)``) makes the host wait for all queued
device work; a blocking host-to-device copy does too. The samplers therefore read a step's results in one
transfer (:func:`to_host`) and send host-side lists with a non-blocking copy (:func:`to_device`).
"""
from __future__ import annotations

import torch


def to_host(*tensors: torch.Tensor) -> list[list]:
    """``t.tolist()`` for each tensor, with one device-to-host transfer in all.

    On a CPU there is nothing to transfer. Elsewhere the tensors are packed into one float64 vector,
    copied once, and each part is cast back to its own dtype before ``tolist``: exact for every float
    dtype up to float64 and for integers below ``2**53`` (token ids, counts)."""
    if all(t.device.type == "cpu" for t in tensors):
        return [t.tolist() for t in tensors]
    return packed_to_host(*tensors)


def packed_to_host(*tensors: torch.Tensor) -> list[list]:
    """The one-transfer path of :func:`to_host` (any device; tested on the CPU)."""
    flat = torch.cat([t.reshape(-1).to(torch.float64) for t in tensors]).cpu()  # the one transfer
    out, start = [], 0
    for t in tensors:
        part = flat[start:start + t.numel()]
        out.append(part.to(t.dtype).view(t.shape).tolist())
        start += t.numel()
    return out


def to_device(values: list[int], device) -> torch.Tensor:
    """``values`` as a long tensor on ``device``, copied without waiting for the device's queued work."""
    return torch.tensor(values, dtype=torch.long).to(device, non_blocking=True)
