"""The pre-check in front of jsonschema (``trajkit.traces.schema_check``) never certifies arguments that
jsonschema rejects, on the bundled samples' every call and on generated schemas and arguments, and it
settles most of the samples' valid calls (else it would save nothing)."""
import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from trajkit.traces import jsonvalue
from trajkit.traces.load import iter_traces
from trajkit.traces.schema_check import certainly_valid, exact_check
from trajkit.traces.tools import argument_problems, arguments_valid

SAMPLES = ["trajkit/data/sample/kimi.jsonl.xz", "trajkit/data/sample/glm-5.1.jsonl.xz"]


def _jsonschema_valid(args, schema) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(args)


def test_every_sample_call_agrees_with_jsonschema():
    certified = valid = calls = 0
    for trace in iter_traces(SAMPLES):
        for msg in trace.messages:
            for call in msg.tool_calls:
                if not (call.ok and call.name in trace.tools):
                    continue
                schema = trace.tools[call.name]["parameters"]
                truth = _jsonschema_valid(call.arguments, schema)
                sure = certainly_valid(call.arguments, schema)
                assert truth or not sure, (call.name, call.arguments)
                assert (argument_problems(call.arguments, schema) == []) == truth
                calls, valid, certified = calls + 1, valid + truth, certified + sure
    assert calls > 100 and valid < calls  # the samples hold invalid calls too
    assert certified >= 0.9 * valid


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False),
                    st.sampled_from([1.0, 2.0, -0.0, 1e300]), st.text("ab", max_size=3))
VALUES = st.recursive(SCALARS, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                      st.dictionaries(st.sampled_from("abc"), kids, max_size=3)),
                      max_leaves=8)
TYPES = st.sampled_from(["string", "number", "integer", "boolean", "object", "array", "null"])


def _schemas(kids, only_known=False):
    keywords = _keywords(kids)
    if only_known:  # the keywords schema_check understands: certifiable schemas
        keywords = {k: v for k, v in keywords.items() if k not in UNKNOWN}
    return st.one_of(st.booleans(), st.fixed_dictionaries({}, optional=keywords))


UNKNOWN = ("pattern", "anyOf", "$ref", "const", "uniqueItems", "prefixItems")


def _keywords(kids):
    return {
        "type": st.one_of(TYPES, st.lists(TYPES, min_size=1, max_size=2, unique=True)),
        "properties": st.dictionaries(st.sampled_from("abc"), kids, max_size=2),
        "required": st.lists(st.sampled_from("abc"), max_size=2, unique=True),
        "additionalProperties": st.one_of(st.booleans(), kids),
        "items": kids,
        "enum": st.one_of(st.lists(st.one_of(st.text("ab", max_size=2), st.integers(0, 2), st.booleans()),
                                   min_size=1, max_size=3), st.lists(st.text("ab", max_size=2), max_size=3)),
        "minimum": st.integers(-3, 3), "maximum": st.floats(-3, 3), "exclusiveMinimum": st.integers(-3, 3),
        "exclusiveMaximum": st.integers(-3, 3), "minItems": st.integers(0, 2), "maxItems": st.integers(0, 3),
        "minLength": st.integers(0, 2), "maxLength": st.integers(0, 3), "description": st.text(max_size=3),
        "format": st.sampled_from(["uri", "date-time", "email"]), "pattern": st.sampled_from(["^a", "b$"]),
        "anyOf": st.lists(kids, min_size=1, max_size=2), "$ref": st.just("#"), "const": SCALARS,
        "uniqueItems": st.booleans(), "prefixItems": st.lists(kids, min_size=1, max_size=2),
    }


SCHEMAS = st.recursive(st.one_of(st.booleans(), st.fixed_dictionaries({}, optional={"type": TYPES})), _schemas,
                       max_leaves=6)


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(SCHEMAS, VALUES)
def test_generated_schemas_never_certify_what_jsonschema_rejects(schema, value):
    jsonschema.Draft202012Validator.check_schema(schema)
    if certainly_valid(value, schema):
        assert _jsonschema_valid(value, schema)


def test_hand_cases_follow_jsonschema():
    """The rules that differ between drafts or between Python and JSON: each against jsonschema itself."""
    cases = [({"type": "integer"}, 1.0), ({"type": "integer"}, True), ({"type": "number"}, False),
             ({"type": "integer"}, jsonvalue.loads("18446744073709551616")), ({"type": "integer"}, 1.5),
             ({"enum": ["1"]}, 1), ({"enum": [1]}, True), ({"enum": ["a"]}, "a"), ({"minimum": 0}, True),
             ({"maxLength": 1}, "é"), ({"maxLength": 1}, "\U0001F600"), ({"$schema": "http://json-schema.org/"
                                                                         "draft-04/schema#", "type": "integer"}, 1.0),
             ({"properties": {"a": False}}, {"a": 1}), ({"additionalProperties": False, "properties": {"a": {}}},
                                                         {"a": 1}), ({"items": False}, []), ({"items": False}, [1]),
             ({"type": "number", "maximum": 1}, jsonvalue.loads("1e400")), ({"required": ["a"]}, []),
             ({"exclusiveMinimum": 0}, 0), ({"exclusiveMaximum": 0}, 0), ({"minimum": 0}, -1), ({"maximum": 0}, 1),
             ({"minItems": 1}, []), ({"maxItems": 0}, [1]), ({"minLength": 1}, "")]
    for schema, value in cases:
        if certainly_valid(value, schema):
            assert jsonschema.validators.validator_for(schema)(schema).is_valid(value), (schema, value)
    assert certainly_valid(1.0, {"type": "integer"}) and not certainly_valid(True, {"type": "integer"})


def test_equal_schemas_share_a_validator_and_keep_their_own_error_order():
    """Validators are cached per schema text (tool tables repeat the same tools); a schema written with
    its keys in another order is another text, so its errors come in its own order, as jsonschema's do."""
    import copy

    from trajkit.traces.tools import _validator

    first = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}
    swapped = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}}
    args = {"a": 1, "b": "x"}
    assert _validator(copy.deepcopy(first)) is _validator(first)
    for schema in (first, copy.deepcopy(first), swapped):
        expected = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(args)]
        got = [p.split(": ", 1)[1] for p in argument_problems(args, schema)]
        assert got == expected and len(got) == 2


# ---- certified schemas: judged exactly without jsonschema (schema_check.exact_check) ----

BAD_VALUES = {  # a value the Draft 2020-12 metaschema refuses, per keyword
    "type": st.sampled_from(["str", [], ["string", "string"], 3, ["int"]]),
    "required": st.sampled_from([["a", "a"], "a", [1], {}]),
    "properties": st.sampled_from([[], {"a": 3}, {"a": "x"}]),
    "additionalProperties": st.sampled_from([3, "x", []]), "items": st.sampled_from([[{}], 3, "x"]),
    "enum": st.sampled_from(["a", 3, {}]), "minimum": st.sampled_from([True, "1", None]),
    "maximum": st.sampled_from([False, [1]]), "minItems": st.sampled_from([-1, 1.5, True, "1"]),
    "maxLength": st.sampled_from([-2, 0.5, False]), "description": st.sampled_from([3, None, []]),
    "title": st.sampled_from([3, {}]), "examples": st.sampled_from(["x", 3, {}]), "format": st.sampled_from([3, []]),
    "$comment": st.sampled_from([1, None]),
}


def _with_bad_value(kids):
    return st.sampled_from(sorted(BAD_VALUES)).flatmap(
        lambda key: st.builds(lambda base, value: {**(base if isinstance(base, dict) else {}), key: value},
                              _schemas(kids), BAD_VALUES[key]))


ANY_SCHEMAS = st.recursive(st.one_of(st.booleans(), st.fixed_dictionaries({}, optional={"type": TYPES})),
                           lambda kids: st.one_of(_schemas(kids, only_known=True), _schemas(kids),
                                                  _with_bad_value(kids)), max_leaves=6)


def _schema_ok(schema) -> bool:
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError:
        return False
    return True


@settings(max_examples=2500, deadline=None, derandomize=True)
@given(ANY_SCHEMAS, VALUES)
def test_certified_schemas_are_valid_and_judged_exactly(schema, value):
    """A certified schema passes check_schema, and its check is jsonschema's is_valid (both ways)."""
    check = exact_check(schema)
    if check is None:
        return
    assert _schema_ok(schema), schema
    assert check(value) == _jsonschema_valid(value, schema), (schema, value)


def test_certification_takes_most_generated_valid_schemas_and_no_invalid_one():
    """The generator reaches both sides (else the property above would test nothing)."""
    from hypothesis import find

    find(ANY_SCHEMAS, lambda s: exact_check(s) is not None and isinstance(s, dict) and len(s) >= 3,
         settings=settings(database=None))
    find(ANY_SCHEMAS, lambda s: exact_check(s) is None and _schema_ok(s), settings=settings(database=None))
    find(ANY_SCHEMAS, lambda s: not _schema_ok(s), settings=settings(database=None))


def test_certified_hand_cases():
    """Metaschema edges, each against jsonschema: what is certified is valid, and exactly judged."""
    cases = [({"minLength": 1.0}, "", True), ({"enum": []}, "a", True), ({"enum": [1, "a"]}, 1, False), ({"enum": ["a"]}, "b", True),
             ({"type": ["string", "null"]}, None, True), ({"type": []}, 1, False), ({"required": ["a", "a"]}, {}, False),
             ({"$schema": "https://json-schema.org/draft/2020-12/schema"}, 1, False), ({"pattern": "^a"}, "b", False),
             ({"items": [{}]}, [1], False), ({"maximum": True}, 2, False), ({"properties": {"a": False}}, {"a": 1}, True),
             ({"type": "integer", "minimum": 0}, -1.0, True), ({"examples": []}, 1, True), ({"const": 1}, 1, False)]
    for schema, value, is_certified in cases:
        check = exact_check(schema)
        assert (check is not None) == is_certified, schema
        if check is not None:
            assert _schema_ok(schema) and check(value) == _jsonschema_valid(value, schema), (schema, value)
    deep = {"type": "object"}
    for _ in range(40):
        deep = {"type": "object", "properties": {"a": deep}}
    assert exact_check(deep) is None  # deeper than the certification goes: jsonschema decides


def test_sample_tools_are_certified_and_arguments_valid_is_jsonschemas():
    """Every bundled sample tool is certified (so ``traces stats`` on them never imports jsonschema), and
    :func:`arguments_valid` equals jsonschema on every sample call, and on each call against the schema
    mutated in ways that leave it certified or not."""
    calls = 0
    for trace in iter_traces(SAMPLES):
        for spec in trace.tools.values():
            assert exact_check(spec["parameters"]) is not None, spec["name"]
        for msg in trace.messages:
            for call in msg.tool_calls:
                if not (call.ok and call.name in trace.tools):
                    continue
                schema = trace.tools[call.name]["parameters"]
                variants = [schema, {**schema, "additionalProperties": False}, {**schema, "maxProperties": 1},
                            {**schema, "required": [*schema.get("required", ()), "zz"]}]
                for variant in variants:
                    truth = _jsonschema_valid(call.arguments, variant)
                    assert arguments_valid(call.arguments, variant) == truth
                    assert (argument_problems(call.arguments, variant) == []) == truth
                calls += 1
    assert calls > 100


def test_stats_on_the_samples_do_not_import_jsonschema():
    import subprocess
    import sys

    code = ("import sys; from trajkit.traces.stats import compute_stats; "
            f"s = compute_stats({SAMPLES!r}, progress=False, workers=1).to_dict(); "
            "assert s['invalid_argument_calls'] > 0; print('jsonschema' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
