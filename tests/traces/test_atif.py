"""Harbor's ATIF <-> OpenAI messages: a hand-written trajectory in the RFC's shape reads as the conversation it
records (and ``trajkit traces stats`` counts its tool calls); OpenAI rows survive the round trip exactly; bad
steps are one error naming the step and field."""
import json

import pytest

from trajkit.cli.main import main
from trajkit.errors import InputError
from trajkit.traces.atif import from_atif, to_atif
from trajkit.traces.load import iter_traces

# written by hand from the format's documentation, not by to_atif
TRAJECTORY = {
    "schema_version": "ATIF-v1.4", "session_id": "s-1",
    "agent": {"name": "my-agent", "version": "1.0", "model_name": "m"},
    "steps": [
        {"step_id": 1, "source": "user", "message": "Create hello.txt."},
        {"step_id": 2, "source": "agent", "message": "I'll create it.", "reasoning_content": "easy",
         "tool_calls": [{"tool_call_id": "c1", "function_name": "bash",
                         "arguments": {"command": "echo hi > hello.txt"}}],
         "observation": {"results": [{"source_call_id": "c1", "content": "exit 0"}]}},
        {"step_id": 3, "source": "agent", "message": [{"type": "text", "text": "Done"}, {"type": "text", "text": "."}]},
    ],
    "extra": {"category": "file", "task": "hello"},
}


def test_a_handwritten_trajectory_reads_as_its_conversation(tmp_path, capsys):
    assert from_atif(TRAJECTORY) == [
        {"role": "user", "content": "Create hello.txt."},
        {"role": "assistant", "content": "I'll create it.", "reasoning_content": "easy",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "bash", "arguments": '{"command": "echo hi > hello.txt"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "exit 0"},
        {"role": "assistant", "content": "Done."}]
    path = tmp_path / "trajectory.json"  # Harbor writes one trajectory per file
    path.write_text(json.dumps(TRAJECTORY))
    (trace,) = list(iter_traces([str(path)], strict=True))
    assert (trace.id, trace.category, trace.task) == ("s-1", "file", "hello")
    assert main(["traces", "stats", str(path), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["traces"], stats["assistant_turns"], stats["tool_calls"], stats["tool_responses"],
            stats["tool_call_counts"]) == (1, 2, 1, 1, {"bash": 1})


def test_openai_rows_survive_the_round_trip():
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"},
                {"role": "assistant", "content": "```bash\nls\n```"}, {"role": "user", "content": "exit code: 0\n"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
                    {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "a", "content": "1"}, {"role": "tool", "tool_call_id": "b", "content": "2"},
                {"role": "assistant", "content": "Done."}]
    doc = to_atif(messages, "x")
    assert [s["source"] for s in doc["steps"]] == ["system", "user", "agent", "user", "agent", "agent"]
    assert [s["step_id"] for s in doc["steps"]] == [1, 2, 3, 4, 5, 6]
    assert from_atif(doc) == messages


@pytest.mark.parametrize("step,field", [
    ({"step_id": 2, "source": "user", "message": "x"}, "steps[0].step_id"),
    ({"step_id": 1, "source": "tool", "message": "x"}, "steps[0].source"),
    ({"step_id": 1, "source": "user", "message": 3}, "steps[0].message"),
])
def test_a_bad_step_is_one_error_naming_it(tmp_path, step, field):
    with pytest.raises(InputError) as err:
        from_atif({"schema_version": "ATIF-v1.4", "steps": [step]})
    assert err.value.field == field
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"schema_version": "ATIF-v1.4", "steps": [step]}) + "\n" + json.dumps(TRAJECTORY) + "\n")
    errors = []
    assert [t.id for t in iter_traces([str(path)], on_error=errors.append)] == ["s-1"]  # the good row survives
    assert "bad.jsonl" in str(errors[0]) and field in str(errors[0])
