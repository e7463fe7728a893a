"""Hub names (``org/name``) resolved to a folder of the local Hugging Face cache, never downloaded.

The cache is the one ``huggingface_hub`` uses: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
``~/.cache/huggingface/hub``, read when the name is resolved (so a test can point it elsewhere). A
snapshot of the cache layout ``models--org--name/{refs/main, snapshots/<commit>/}`` is returned as it is;
the lookup is local only (``local_files_only=True``), whatever ``HF_HUB_OFFLINE`` says, so a run never
touches the network. A name not in the cache raises one :class:`ConfigError` saying how to fetch it.
"""
from __future__ import annotations

import os
import re

from trajkit.errors import ConfigError

HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def is_hub_name(text: str) -> bool:
    """``org/name`` that is not an existing path."""
    return bool(HUB_NAME.match(text)) and not os.path.exists(text)


def hub_cache() -> str:
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return os.path.join(home, "hub")


def resolve_hub_model(name: str, what: str = "policy.path", revision: str = "main") -> str:
    """The local snapshot folder of hub model ``name`` (``org/name``)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    if not HUB_NAME.match(name):
        raise ConfigError(f"{what}: {name!r} is not a hub name (org/name) nor an existing folder")
    cache = hub_cache()
    try:
        folder = snapshot_download(name, revision=revision, cache_dir=cache, local_files_only=True)
    except LocalEntryNotFoundError:
        offline = " (HF_HUB_OFFLINE is set: fetch it on a machine with network)" \
            if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes") else ""
        raise ConfigError(f"{what}: model {name!r} is not in the local Hugging Face cache {cache}{offline}; "
                          f"fetch it once with `hf download {name}` (or `huggingface-cli download {name}`), or "
                          "give a local folder") from None
    if not os.path.exists(os.path.join(folder, "config.json")):
        raise ConfigError(f"{what}: the cached snapshot {folder} of {name!r} has no config.json; fetch the whole "
                          f"model with `hf download {name}`")
    return folder
