"""The pre-check in front of jsonschema (``trajkit.traces.schema_check``) never certifies arguments that
jsonschema rejects, on the bundled samples' every call and on generated schemas and arguments, and it
settles most of the samples' valid calls (else it would save nothing)."""
import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from trajkit.traces import jsonvalue
from trajkit.traces.load import iter_traces
from trajkit.traces.schema_check import certainly_valid
from trajkit.traces.tools import argument_problems

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


def _schemas(kids):
    keywords = st.fixed_dictionaries({}, optional={
        "type": st.one_of(TYPES, st.lists(TYPES, min_size=1, max_size=2, unique=True)),
        "properties": st.dictionaries(st.sampled_from("abc"), kids, max_size=2),
        "required": st.lists(st.sampled_from("abc"), max_size=2, unique=True),
        "additionalProperties": st.one_of(st.booleans(), kids),
        "items": kids,
        "enum": st.lists(st.one_of(st.text("ab", max_size=2), st.integers(0, 2), st.booleans()), min_size=1,
                         max_size=3),
        "minimum": st.integers(-3, 3), "maximum": st.floats(-3, 3), "exclusiveMinimum": st.integers(-3, 3),
        "exclusiveMaximum": st.integers(-3, 3), "minItems": st.integers(0, 2), "maxItems": st.integers(0, 3),
        "minLength": st.integers(0, 2), "maxLength": st.integers(0, 3), "description": st.text(max_size=3),
        "format": st.sampled_from(["uri", "date-time", "email"]), "pattern": st.sampled_from(["^a", "b$"]),
        "anyOf": st.lists(kids, min_size=1, max_size=2), "$ref": st.just("#"), "const": SCALARS,
        "uniqueItems": st.booleans(), "prefixItems": st.lists(kids, min_size=1, max_size=2),
    })
    return st.one_of(st.booleans(), keywords)


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
