"""Typed errors. The library raises these; the CLI turns them into one clear line and exit code 2."""
from __future__ import annotations


class TrajkitError(Exception):
    """Base class for every error trajkit raises on purpose."""


class ConfigError(TrajkitError, ValueError):
    """A parameter or config key is invalid. The message names the parameter and what to set."""


class InputError(TrajkitError, ValueError):
    """A piece of input data cannot be read.

    Carries where it happened so a user can open the file at the right place::

        >>> str(InputError("bad JSON", path="a.jsonl", row=3, field="conversations", hint="fix it"))
        'a.jsonl:3: field conversations: bad JSON (fix it)'
    """

    def __init__(self, message: str, *, path: str | None = None, row: int | None = None,
                 field: str | None = None, hint: str | None = None):
        self.message, self.path, self.row, self.field, self.hint = message, path, row, field, hint
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}:{self.row}: " if self.row is not None else f"{self.path}: "
        elif self.row is not None:
            where = f"row {self.row}: "
        field = f"field {self.field}: " if self.field else ""
        hint = f" ({self.hint})" if self.hint else ""
        return f"{where}{field}{self.message}{hint}"


class ModelError(TrajkitError, RuntimeError):
    """A model produced something no sampler can use (NaN or infinite logits): check its weights."""
