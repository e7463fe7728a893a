"""Tool-argument validation is jsonschema's verdict, on the keywords the dataset's own schemas use."""
import jsonschema
import pytest

from trajkit.traces.load import iter_traces
from trajkit.traces.metrics import trace_metrics
from trajkit.traces.tools import argument_problems, schema_problems

SAMPLES = ["trajkit/data/sample/kimi.jsonl.xz", "trajkit/data/sample/glm-5.1.jsonl.xz"]


@pytest.fixture(scope="module")
def sample_tools():
    tools = {}
    for trace in iter_traces(SAMPLES[:1]):
        tools.update(trace.tools)
    return tools


def _errors(schema, args):
    return sorted(e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(args))


@pytest.mark.parametrize("tool,args", [
    ("web_search", {"query": "q", "limit": 0}),  # minimum
    ("web_extract", {"urls": [1, 2, 3, 4, 5, 6]}),  # items type, maxItems
    ("todo", {"todos": [{}]}),  # nested required
    ("read_file", {"path": "a", "offset": 0, "limit": 0}),
])
def test_dataset_keywords_are_checked_like_jsonschema(sample_tools, tool, args):
    schema = sample_tools[tool]["parameters"]
    expected = _errors(schema, args)
    assert expected  # each example breaks its schema
    assert sorted(p.split(": ", 1)[-1] for p in argument_problems(args, schema)) == expected


def test_sample_invalid_calls_match_jsonschema():
    """Every well-formed call to a declared tool in the bundled samples: counted invalid exactly when
    jsonschema says so."""
    ours = theirs = 0
    for trace in iter_traces(SAMPLES):
        ours += trace_metrics(trace).counts["invalid_argument_calls"]
        for msg in trace.messages:
            for call in msg.tool_calls:
                if call.ok and call.name in trace.tools:
                    theirs += not jsonschema.Draft202012Validator(
                        trace.tools[call.name]["parameters"]).is_valid(call.arguments)
    assert ours == theirs and ours > 0


@pytest.mark.parametrize("params", [{"required": 5}, {"properties": "x"}, {"properties": {"a": {"enum": None}}},
                                    {"properties": {"a": {"type": {"x": 1}}}}, {"properties": {"a": {"pattern": "("}}}])
def test_invalid_schema_is_reported_not_applied(params):
    schema = {"type": "object", **params}
    with pytest.raises(jsonschema.SchemaError):
        jsonschema.validators.validator_for(schema).check_schema(schema)
    problems = schema_problems({"t": {"name": "t", "description": "", "parameters": schema}})
    assert len(problems) == 1 and problems[0].startswith("tool 't': invalid JSON Schema")
    assert argument_problems({"a": "b"}, schema) == []
