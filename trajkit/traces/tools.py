"""Tool schemas: read them from a row (``tools`` field or the system prompt's ``<tools>`` block) and
check call arguments against them.

Two spellings are accepted: OpenAI style ``{"type": "function", "function": {name, description,
parameters}}`` (what the dataset's system prompts hold) and the upstream Hermes Agent form
``{name, description, parameters, "required": null}``. The
argument check is ``jsonschema``'s verdict (the schema's own ``$schema`` draft, else 2020-12), with one
validator built per schema and kept, asked only when the cheap pre-check of
:mod:`trajkit.traces.schema_check` cannot certify the arguments valid; a schema that is not valid JSON Schema is reported
(:func:`schema_problems`) and its calls are not judged. Regex patterns run with Python's ``re``.

A schema that :func:`~trajkit.traces.schema_check.exact_check` certifies (only the keywords tool schemas are
usually made of, each with a metaschema-valid value) is known valid and is judged by its compiled check
alone (:func:`arguments_valid`): ``jsonschema`` is imported, and that schema's validator built, only when
another schema needs it or when :func:`argument_problems` must word an error.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import orjson

from trajkit.traces import jsonvalue
from trajkit.traces.schema_check import compile_check, exact_check

ToolTable = dict[str, dict[str, Any]]


def normalize_tools(items: Any) -> ToolTable:
    """``{name: {"name", "description", "parameters"}}`` from tool definitions in either accepted form."""
    table: ToolTable = {}
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        raise ValueError(f"tools must be a list of tool definitions, got {type(items).__name__}")
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"a tool definition must be an object, got {type(item).__name__}")
        spec = item.get("function") if isinstance(item.get("function"), dict) else item
        name = spec.get("name")
        if not isinstance(name, str):
            raise ValueError("a tool definition has no string 'name'")
        params = spec.get("parameters")
        table[name] = {"name": name, "description": spec.get("description") or "",
                       "parameters": params if isinstance(params, dict) else {}}
    return table


@lru_cache(maxsize=64)
def tools_from_json(text: str) -> ToolTable:
    """Parse a JSON tool list (cached: every row of a dataset repeats the same text)."""
    return normalize_tools(orjson.loads(text))


@lru_cache(maxsize=64)
def tools_from_system_prompt(prompt: str) -> ToolTable | None:
    """Tools in the system prompt's ``<tools>…</tools>`` block; None when there is no such block.

    The Hermes preamble also *mentions* "<tools> </tools>" in prose, so the block is the first
    ``<tools>`` whose content starts with ``[`` or ``{``.
    """
    start = prompt.find("<tools>")
    while start >= 0:
        body_at = start + len("<tools>")
        if prompt[body_at:body_at + 64].lstrip()[:1] in ("[", "{"):
            end = prompt.find("</tools>", body_at)
            if end < 0:
                raise ValueError("the system prompt opens <tools> but never closes it")
            return normalize_tools(orjson.loads(prompt[body_at:end]))
        start = prompt.find("<tools>", body_at)
    return None


class Compiled:
    """A usable schema's judges: ``check`` (the pre-check of :func:`~trajkit.traces.schema_check.compile_check`),
    whether it is ``exact`` (certified: False means invalid), and the ``jsonschema`` validator, built on first
    use (:meth:`validator`)."""

    __slots__ = ("schema", "check", "exact", "_validator")

    def __init__(self, schema: dict[str, Any], check, exact: bool, validator: Any = None) -> None:
        self.schema, self.check, self.exact, self._validator = schema, check, exact, validator

    def validator(self) -> Any:
        if self._validator is None:
            from jsonschema import validators

            self._validator = validators.Draft202012Validator(self.schema)  # (certified: no $schema)
        return self._validator


_VALIDATORS: dict[int, tuple[dict[str, Any], Any]] = {}  # id(schema) -> (schema, Compiled or problem)
_BY_TEXT: dict[bytes, Any] = {}  # the schema's JSON text -> Compiled or problem
_MAX_VALIDATORS = 256


def _validator(schema: dict[str, Any]) -> Compiled | str:
    """The :class:`Compiled` judges of ``schema``, or a string saying why the schema cannot be used.

    Cached per schema object (a dataset's rows share their tool table), then per schema text: the tool
    tables of a corpus are many subsets of a few tools, and ``check_schema`` per table was 19% of
    ``traces stats`` on a kimi-style corpus. The text keeps key order, so a validator's error order
    is the one its own schema gives."""
    entry = _VALIDATORS.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry[1]
    try:
        text = jsonvalue.dumps(schema)
    except ValueError:
        text = None
    found = _BY_TEXT.get(text) if text is not None else None
    if found is None:
        found = _compile(schema)
        if text is not None:
            if len(_BY_TEXT) >= _MAX_VALIDATORS:
                _BY_TEXT.clear()
            _BY_TEXT[text] = found
    if len(_VALIDATORS) >= _MAX_VALIDATORS:
        _VALIDATORS.clear()
    _VALIDATORS[id(schema)] = (schema, found)
    return found


def _compile(schema: dict[str, Any]) -> Compiled | str:
    try:
        exact = exact_check(schema)
    except RecursionError:
        exact = None
    if exact is not None:
        return Compiled(schema, exact, True)  # valid for certain: no check_schema, no jsonschema import
    from jsonschema import exceptions, validators

    try:
        cls = validators.validator_for(schema, default=validators.Draft202012Validator)
        cls.check_schema(schema)
        return Compiled(schema, compile_check(schema), False, cls(schema))
    except exceptions.SchemaError as exc:
        return f"invalid JSON Schema at {'/'.join(map(str, exc.absolute_path)) or 'the top'}: {exc.message}"
    except RecursionError:
        return "JSON Schema nested too deeply to check"


def schema_problems(table: ToolTable) -> list[str]:
    """One line per tool whose ``parameters`` cannot be used as a JSON Schema (its calls go unchecked)."""
    out = []
    for name, spec in table.items():
        found = _validator(spec["parameters"])
        if isinstance(found, str):
            out.append(f"tool {name!r}: {found}; its calls' arguments are not checked")
    return out


def arguments_valid(arguments: dict[str, Any], schema: dict[str, Any]) -> bool:
    """``not argument_problems(arguments, schema)``, without wording the errors, and without ``jsonschema``
    when the schema is certified (:func:`~trajkit.traces.schema_check.exact_check`)."""
    found = _validator(schema)
    if isinstance(found, str):
        return True
    if found.check(arguments):
        return True
    return False if found.exact else not _errors(found, arguments)


def argument_problems(arguments: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Reasons ``arguments`` violate ``schema`` under ``jsonschema`` (empty when they conform, or when the
    schema itself is unusable: :func:`schema_problems` reports that once per row)."""
    found = _validator(schema)
    if isinstance(found, str) or found.check(arguments):
        return []
    return _errors(found, arguments)


def _errors(found: Compiled, arguments: dict[str, Any]) -> list[str]:
    from jsonschema import exceptions
    from referencing.exceptions import Unresolvable

    try:
        return [_problem(e) for e in found.validator().iter_errors(arguments)]
    except (RecursionError, re.error, exceptions.SchemaError, Unresolvable):
        return []


def _problem(error) -> str:
    where = "/".join(map(str, error.absolute_path))
    return f"{where}: {error.message}" if where else error.message
