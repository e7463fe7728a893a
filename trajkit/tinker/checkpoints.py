"""``tinker://`` checkpoints as folders under the server's checkpoint directory.

A path is ``tinker://{model_id}/{kind}/{name}`` (the SDK's ``ParsedCheckpointTinkerPath``: three parts,
``kind`` ``weights`` for training state, ``sampler_weights`` for an adapter to sample from); its folder
is ``ROOT/{model_id}/{kind}/{name}/`` holding ``meta.json`` (base model, LoRA rank/alpha/targets/seed,
scale, time) and ``state.pt`` (``torch.load(..., weights_only=True)``: the adapter's tensors, the
optimiser's state for ``weights``, the step count). Names are one path segment of letters, digits,
``._-``; anything else is a user error, so no path leaves ROOT.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import asdict
from pathlib import Path

import torch

from trajkit.errors import InputError
from trajkit.rl.config import LoRAConfig

KINDS = {"weights": "training", "sampler_weights": "sampler"}
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_MODEL_ID = re.compile(r"^[A-Za-z0-9._:-]+$")


def tinker_path(model_id: str, kind: str, name: str) -> str:
    return f"tinker://{model_id}/{kind}/{name}"


def parse(path: str) -> tuple[str, str, str]:
    """``tinker://model_id/kind/name`` -> (model_id, kind, name), or a user error naming the path."""
    parts = path[len("tinker://"):].split("/") if path.startswith("tinker://") else []
    if len(parts) != 3 or parts[1] not in KINDS or not _MODEL_ID.match(parts[0]) or not _NAME.match(parts[2]) \
            or parts[2] in (".", ".."):
        raise InputError(f"{path!r} is not a checkpoint path of this server (tinker://MODEL_ID/weights/NAME or "
                         "tinker://MODEL_ID/sampler_weights/NAME)", field="path")
    return parts[0], parts[1], parts[2]


def check_name(name: str) -> str:
    if not _NAME.match(name) or name in (".", ".."):
        raise InputError(f"checkpoint name {name!r}: use letters, digits and ._- only", field="path")
    return name


class Store:
    def __init__(self, root: str | Path):
        self.root = Path(root)

    def folder(self, path: str) -> Path:
        model_id, kind, name = parse(path)
        return self.root / model_id / kind / name

    def save(self, path: str, base_model: str, lora: LoRAConfig, state: dict) -> None:
        folder = self.folder(path)
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(state, folder / "state.pt")
        meta = {"base_model": base_model, "lora": asdict(lora), "time": time.time(), "tinker_path": path}
        (folder / "meta.json").write_text(json.dumps(meta))

    def load(self, path: str) -> tuple[dict, dict]:
        """-> (meta, state) of the checkpoint at ``path``; a user error when there is none."""
        folder = self.folder(path)
        if not (folder / "state.pt").exists():
            raise InputError(f"no checkpoint at {path!r}", field="path")
        meta = json.loads((folder / "meta.json").read_text())
        return meta, torch.load(folder / "state.pt", weights_only=True)

    def meta(self, path: str) -> dict:
        return self.load(path)[0]

    def listing(self, model_id: str) -> list[dict]:
        """The model's checkpoints as Tinker ``Checkpoint`` dicts, oldest first."""
        out = []
        for kind, ctype in KINDS.items():
            for folder in sorted((self.root / model_id / kind).glob("*/meta.json")):
                meta = json.loads(folder.read_text())
                out.append({"checkpoint_id": f"{kind}/{folder.parent.name}", "checkpoint_type": ctype,
                            "time": _iso(meta["time"]), "tinker_path": meta["tinker_path"],
                            "size_bytes": (folder.parent / "state.pt").stat().st_size})
        return sorted(out, key=lambda c: c["time"])


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
