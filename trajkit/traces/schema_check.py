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

:func:`exact_check` goes one step further for the schemas a tool table is usually made of: when every keyword
of the schema (at every level) is one of the above, with the value Draft 2020-12's metaschema requires
(``type`` a type name or a non-empty list of distinct ones, ``required`` distinct strings, the bounds numbers,
the counts non-negative integers, the annotations of their type, ...), and every ``enum`` holds strings only,
then (a) ``check_schema`` would pass, and (b) the compiled check is not just sure but exact: False means
jsonschema finds an error. Such a schema is judged without importing ``jsonschema`` at all (its import and
a ``check_schema`` per tool were ~0.34 G instructions of a 4,000-row ``traces stats``); any other schema
gets None and goes to jsonschema as before. Tested against ``check_schema`` and ``is_valid`` on generated
valid and invalid schemas and on every sample tool.
"""
from __future__ import annotations

from numbers import Number
from typing import Any, Callable

_ANNOTATIONS = frozenset(("description", "title", "default", "examples", "$comment", "format"))
_KNOWN = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties", "items", "enum", "minimum",
                         "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
                         "minLength", "maxLength"}


def _is_number(value: Any) -> bool:
    return isinstance(value, Number) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    """jsonschema's Draft 2020-12 integer: an integer-valued float is one, a bool is not."""
    return not isinstance(value, bool) and (isinstance(value, int) or isinstance(value, float) and value.is_integer())


def certainly_valid(instance: Any, schema: Any) -> bool:
    """True only when ``schema`` (a Draft 2020-12 schema that passed ``check_schema``) accepts ``instance``
    for certain; False means "ask jsonschema", not "invalid"."""
    return compile_check(schema)(instance)


Check = Callable[[Any], bool]


def compile_check(schema: Any) -> Check:
    """:func:`certainly_valid` for one schema, compiled once into closures (the schema's keywords are read
    here, not per call): ``compile_check(schema)(instance) == certainly_valid(instance, schema)``. A schema
    that only names a type (the common leaf, ``{"type": "string", "description": …}``) compiles to the type
    test itself."""
    if schema is True:
        return _always
    if not isinstance(schema, dict) or not schema.keys() <= _KNOWN:
        return _never  # $schema (another draft), $ref, combinators, patterns ...: not certain
    keys = schema.keys()
    kinds = _kinds_test(schema.get("type"))
    enum = _enum_test(schema["enum"]) if "enum" in schema else None
    for_object = _object_check(schema) if keys & _OBJECT_KEYS else None
    for_array = _array_check(schema) if keys & _ARRAY_KEYS else None
    for_string = (schema.get("minLength", 0), schema.get("maxLength")) if keys & _STRING_KEYS else None
    bounds = tuple((key, schema[key]) for key in _RANGE if key in schema)
    if enum is None and for_object is None and for_array is None and for_string is None and not bounds:
        return kinds or _always
    if kinds is _TYPE["object"] and enum is None and for_object is not None:
        # a tool's parameters, the common case: only a dict passes the type, and only for_object reads a dict
        return lambda instance: isinstance(instance, dict) and for_object(instance)

    def check(instance: Any) -> bool:
        if kinds is not None and not kinds(instance):
            return False
        if enum is not None and not enum(instance):
            return False
        if isinstance(instance, dict):
            return for_object is None or for_object(instance)
        if isinstance(instance, list):
            return for_array is None or for_array(instance)
        if isinstance(instance, str):
            return for_string is None or (for_string[0] <= len(instance)
                                          and (for_string[1] is None or len(instance) <= for_string[1]))
        if bounds and _is_number(instance):
            return _in_range(instance, bounds)
        return True

    return check


def exact_check(schema: Any) -> Check | None:
    """:func:`compile_check` of ``schema`` when it is certified (see the module's doc: valid Draft 2020-12,
    and the compiled check equals jsonschema's ``is_valid``), else None (ask jsonschema)."""
    return compile_check(schema) if certified(schema) else None


_SIMPLE_TYPES = frozenset(("array", "boolean", "integer", "null", "number", "object", "string"))
_MAX_CERTIFIED_DEPTH = 32  # deeper schemas go to jsonschema (which also words "nested too deeply")


def certified(schema: Any, depth: int = 0) -> bool:
    """Whether ``schema`` passes Draft 2020-12's ``check_schema`` for certain and :func:`compile_check` is
    exact on it: a bool, or an object (without ``$schema``) whose every keyword is a known one holding the
    value the metaschema requires, every ``enum`` a list of strings, every subschema certified too."""
    if schema is True or schema is False:
        return True
    if type(schema) is not dict or depth > _MAX_CERTIFIED_DEPTH or not schema.keys() <= _KNOWN:
        return False
    for key, value in schema.items():
        rule = _KEYWORD_RULES.get(key)
        if rule is not None and not rule(value):
            return False
    subschemas = list(schema.get("properties", {}).values())
    subschemas += [schema[key] for key in ("additionalProperties", "items") if key in schema]
    return all(certified(sub, depth + 1) for sub in subschemas)


def _distinct_strings(value: Any) -> bool:
    return type(value) is list and all(type(v) is str for v in value) and len(set(value)) == len(value)


def _type_value(value: Any) -> bool:
    if type(value) is str:
        return value in _SIMPLE_TYPES
    return _distinct_strings(value) and len(value) > 0 and all(v in _SIMPLE_TYPES for v in value)


def _count_value(value: Any) -> bool:
    return _is_integer(value) and value >= 0


def _is_schema(value: Any) -> bool:
    return type(value) is dict or value is True or value is False


_KEYWORD_RULES: dict[str, Check] = {  # the metaschema's rule for each known keyword (subschemas: certified)
    "type": _type_value, "required": _distinct_strings,
    "properties": lambda v: type(v) is dict and all(_is_schema(s) for s in v.values()),
    "additionalProperties": _is_schema, "items": _is_schema,
    "enum": lambda v: type(v) is list and all(type(o) is str for o in v),  # (strings only: exact)
    "minimum": _is_number, "maximum": _is_number, "exclusiveMinimum": _is_number, "exclusiveMaximum": _is_number,
    "minItems": _count_value, "maxItems": _count_value, "minLength": _count_value, "maxLength": _count_value,
    "description": lambda v: type(v) is str, "title": lambda v: type(v) is str,
    "$comment": lambda v: type(v) is str, "format": lambda v: type(v) is str,
    "examples": lambda v: type(v) is list,
}


_OBJECT_KEYS = frozenset(("properties", "required", "additionalProperties"))
_ARRAY_KEYS = frozenset(("items", "minItems", "maxItems"))
_STRING_KEYS = frozenset(("minLength", "maxLength"))


def _kinds_test(kind: Any) -> Check | None:
    """The ``type`` keyword's test (None when there is none)."""
    if kind is None:
        return None
    tests = tuple(_TYPE.get(t, _never) for t in ([kind] if isinstance(kind, str) else kind))
    if len(tests) == 1:
        return tests[0]
    return lambda instance: any(test(instance) for test in tests)


def _always(instance: Any) -> bool:
    return True


def _never(instance: Any) -> bool:
    return False


def _enum_test(options: Any) -> Check:
    if not all(isinstance(o, str) for o in options):
        return _never
    allowed = frozenset(options)
    return lambda instance: isinstance(instance, str) and instance in allowed


_RANGE = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_TYPE: dict[str, Check] = {  # jsonschema's Draft 2020-12 type checker
    "string": lambda v: isinstance(v, str), "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list), "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None, "number": lambda v: _is_number(v),
    "integer": _is_integer,
}


def _in_range(value: Any, bounds: tuple[tuple[str, Any], ...]) -> bool:
    for key, limit in bounds:
        if key == "minimum" and value < limit or key == "maximum" and value > limit:
            return False
        if key == "exclusiveMinimum" and value <= limit or key == "exclusiveMaximum" and value >= limit:
            return False
    return True


def _object_check(schema: dict[str, Any]) -> Check:
    required = tuple(schema.get("required", ()))
    properties = {key: compile_check(sub) for key, sub in schema.get("properties", {}).items()}
    extra = compile_check(schema.get("additionalProperties", True))

    def check(instance: dict[str, Any]) -> bool:
        for name in required:
            if name not in instance:
                return False
        for key, value in instance.items():
            if not properties.get(key, extra)(value):
                return False
        return True

    return check


def _array_check(schema: dict[str, Any]) -> Check:
    low, high = schema.get("minItems", 0), schema.get("maxItems")
    items = compile_check(schema.get("items", True))

    def check(instance: list[Any]) -> bool:
        if len(instance) < low or high is not None and len(instance) > high:
            return False
        return items is _always or all(items(item) for item in instance)

    return check
