"""A cheap pre-check that settles most tool-call arguments before ``jsonschema`` is asked.

:func:`certainly_valid` answers True only when ``jsonschema``'s Draft 2020-12 validator (what
:mod:`trajkit.traces.tools` uses for a schema without ``$schema``) would find no error; anything it is not
sure of is False, and the caller asks ``jsonschema`` (which also words the errors). So verdicts are
``jsonschema``'s exactly by construction, as long as every rule below is jsonschema's: the tests check
them against it on every call of the bundled samples and on generated schemas and arguments.

It understands the keywords tool schemas are made of: ``type``, ``properties``, ``required``,
``additionalProperties`` (without ``patternProperties``), ``items`` (a schema, without ``prefixItems``),
``enum`` of strings, ``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum``,
``minItems``/``maxItems``, ``minLength``/``maxLength``, and annotations (``description``, ``title``,
``default``, ``examples``, ``$comment``, and ``format``, which jsonschema does not assert without a format
checker). A schema with any other keyword, or with ``$schema`` (another draft), is left to ``jsonschema``.
Why it exists: on a Hermes corpus jsonschema's ``iter_errors`` was ~35% of ``traces stats``.
"""
from __future__ import annotations

from numbers import Number
from typing import Any

_ANNOTATIONS = frozenset(("description", "title", "default", "examples", "$comment", "format"))
_KNOWN = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties", "items", "enum", "minimum",
                         "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
                         "minLength", "maxLength"}


def _is_number(value: Any) -> bool:
    return isinstance(value, Number) and not isinstance(value, bool)


def _is_type(value: Any, name: str) -> bool:
    """jsonschema's Draft 2020-12 type checker (an integer-valued float is an integer; a bool is no number)."""
    if name == "string":
        return isinstance(value, str)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if name == "number":
        return _is_number(value)
    if name == "integer":
        return not isinstance(value, bool) and (isinstance(value, int)
                                                or isinstance(value, float) and value.is_integer())
    return False


def certainly_valid(instance: Any, schema: Any) -> bool:
    """True only when ``schema`` (a Draft 2020-12 schema that passed ``check_schema``) accepts ``instance``
    for certain; False means "ask jsonschema", not "invalid"."""
    return _valid(instance, schema)


def _valid(instance: Any, schema: Any) -> bool:
    """``$schema`` (another draft), ``$ref``, combinators, patterns ...: not a known keyword, so not certain."""
    if schema is True:
        return True
    if not isinstance(schema, dict) or not schema.keys() <= _KNOWN:
        return False
    kind = schema.get("type")
    if kind is not None and not any(_is_type(instance, t) for t in ([kind] if isinstance(kind, str) else kind)):
        return False
    if "enum" in schema and not _in_string_enum(instance, schema["enum"]):
        return False
    if isinstance(instance, dict):
        return _valid_object(instance, schema)
    if isinstance(instance, list):
        return _valid_array(instance, schema)
    if isinstance(instance, str):
        return schema.get("minLength", 0) <= len(instance) <= schema.get("maxLength", len(instance))
    if _is_number(instance):
        return _in_range(instance, schema)
    return True


def _in_string_enum(instance: Any, options: Any) -> bool:
    return isinstance(instance, str) and all(isinstance(o, str) for o in options) and instance in options


def _in_range(value: Any, schema: dict[str, Any]) -> bool:
    if "minimum" in schema and value < schema["minimum"]:
        return False
    if "maximum" in schema and value > schema["maximum"]:
        return False
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        return False
    return not ("exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"])


def _valid_object(instance: dict[str, Any], schema: dict[str, Any]) -> bool:
    if any(name not in instance for name in schema.get("required", ())):
        return False
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, value in instance.items():
        if not _valid(value, properties[key] if key in properties else extra):
            return False
    return True


def _valid_array(instance: list[Any], schema: dict[str, Any]) -> bool:
    if not schema.get("minItems", 0) <= len(instance) <= schema.get("maxItems", len(instance)):
        return False
    items = schema.get("items", True)
    return items is True or all(_valid(item, items) for item in instance)
