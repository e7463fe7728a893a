"""Tool schemas: read them from a row (``tools`` field or the system prompt's ``<tools>`` block) and
check call arguments against them.

Two spellings are accepted: OpenAI style ``{"type": "function", "function": {name, description,
parameters}}`` (what the dataset's system prompts hold) and the upstream Hermes Agent form
``{name, description, parameters, "required": null}``. The argument check is a deliberately small
JSON-Schema subset -- ``required``, property ``type`` (incl. type lists), ``enum`` and
``additionalProperties: false`` -- which is what tool schemas use; it is cached per schema text.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import orjson

ToolTable = dict[str, dict[str, Any]]

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list,), "object": (dict,), "null": (type(None),),
}


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


def _type_ok(value: Any, expected: Any) -> bool:
    names = expected if isinstance(expected, list) else [expected]
    for name in names:
        kinds = _JSON_TYPES.get(name)
        if kinds is None:
            return True  # unknown type keyword: do not judge
        if isinstance(value, bool) and name in ("integer", "number"):
            continue
        if isinstance(value, kinds):
            return True
    return False


def argument_problems(arguments: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Reasons ``arguments`` violate ``schema`` (empty list when they conform)."""
    problems = []
    props = schema.get("properties") or {}
    for key in schema.get("required") or []:
        if key not in arguments:
            problems.append(f"missing required argument {key!r}")
    for key, value in arguments.items():
        spec = props.get(key)
        if spec is None:
            if schema.get("additionalProperties") is False:
                problems.append(f"unexpected argument {key!r}")
            continue
        if "type" in spec and not _type_ok(value, spec["type"]):
            problems.append(f"argument {key!r} should be {spec['type']}, got {type(value).__name__}")
        elif "enum" in spec and value not in spec["enum"]:
            problems.append(f"argument {key!r} must be one of {spec['enum']}")
    return problems
