"""Objects named by import path in configs: ``task.name: my_pkg.tasks:make_task``,
``rewards: [my_pkg.rewards:exact]`` (the ``module:attribute`` form of entry points)."""
from __future__ import annotations

import importlib
from typing import Any

from trajkit.errors import ConfigError


def is_import_path(text: str) -> bool:
    return isinstance(text, str) and ":" in text


def import_object(path: str, what: str) -> Any:
    """``"pkg.mod:attr.sub"`` -> the object; a :class:`ConfigError` naming ``what`` when it cannot be had."""
    if not is_import_path(path):
        raise ConfigError(f"{what}: {path!r} is not an import path; write it as 'package.module:name'")
    module_name, _, attr = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{what}: cannot import module {module_name!r} ({exc}); is it installed or on "
                          "PYTHONPATH?") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{what}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj
