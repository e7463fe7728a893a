"""Pure pieces: parsing model text into the API message, stitching by token prefixes."""
from trajkit.gateway.formats import Hermes, think_glue
from trajkit.gateway.parse import parse_output
from trajkit.gateway.render import hermes_assistant_text
from trajkit.gateway.sessions import CallRecord, ChoiceRecord
from trajkit.gateway.stitch import stitch
from trajkit.models.tokenizer import byte_tokenizer


CALLS = ('Let me look.\n<tool_call>\n{"name": "terminal", "arguments": {"command": "ls -l"}}'
         '\n</tool_call>\n<tool_call>\n{"name": "read", "arguments": {"path": "a", "n": 10}}\n</tool_call>')


def test_parse_splits_reasoning_content_and_calls_and_renders_back():
    text = '<think>\nplan\n</think>\n' + CALLS  # Hermes text: one newline after </think>
    m = parse_output(text, "x")
    assert (m.reasoning, m.content) == ("plan", "Let me look.")
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in m.calls] == [
        ("terminal", '{"command": "ls -l"}'), ("read", '{"path": "a", "n": 10}')]
    assert len({c["id"] for c in m.calls}) == 2 and not m.diagnostics
    assert hermes_assistant_text(m.message()) == text


def test_a_templates_own_think_glue_is_split_off_with_it():
    text = '<think>\nplan\n</think>\n\n' + CALLS  # trajkit's own template and Qwen3 write two newlines
    glued = parse_output(text, "x", think_glue="\n\n")
    assert (glued.reasoning, glued.content, glued.diagnostics) == ("plan", "Let me look.", [])
    assert Hermes(think_glue="\n\n").assistant_text(glued.message()) == text
    plain = parse_output(text, "x")  # read as Hermes text, the second newline is content: still lossless
    assert (plain.reasoning, plain.content, plain.diagnostics) == ("plan", "\nLet me look.", [])
    assert think_glue(byte_tokenizer()) == "\n\n"


def test_an_unparseable_call_stays_in_content_with_a_diagnostic():
    text = 'ok\n<tool_call>\n{"name": "terminal", "arguments": {"command": \n</tool_call>'
    m = parse_output(text)
    assert m.calls == [] and m.content == text
    assert m.diagnostics[0]["code"] == "malformed_tool_call" and m.diagnostics[0]["text"] in text
    assert parse_output("a <tool_call>\n{").diagnostics[0]["code"] == "unclosed_tool_call"
    assert parse_output(" plain text \n").content == " plain text \n"


def _rec(i, prompt, *choices, version=0):
    return CallRecord(i, "chat", "m", prompt, [ChoiceRecord(list(s), [-0.5] * len(s), "stop", "") for s in choices],
                      version, {})


def test_stitch_extends_the_longest_prefix_chain_and_forks_otherwise():
    recs = [_rec(0, [1, 2], [7, 8]), _rec(1, [1, 2, 7, 8, 3], [9], version=1), _rec(2, [1, 5], [6])]
    a, b = stitch(recs)
    assert (a.prompt_ids, a.completion_ids, a.loss_mask) == ([1, 2], [7, 8, 3, 9], [1, 1, 0, 1])
    assert a.logprobs == [-0.5, -0.5, 0.0, -0.5] and a.policy_versions == [0, 1] and a.policy_version == -1
    assert (b.prompt_ids, b.completion_ids) == ([1, 5], [6]) and (b.fork_at["call"], b.fork_at["token"]) == (2, 1)
    assert "does not extend" in b.fork_at["reason"]  # no diagnostic on the replies: the generic reason
    assert a.versions_of_tokens() == [0, 0, -1, 1] and b.versions_of_tokens() == [0]  # per token: its call's


def test_an_agent_sample_carries_each_tokens_version():
    """A push between two turns of a gateway episode (rollout.mode=async): the sample's tokens keep the
    version of the call that sampled them (the stitch docstring's example, calls under versions 3 and 4)."""
    from trajkit.envs.sample import Sample, validate_sample

    [chain] = stitch([_rec(0, [1, 2], [7, 8], version=3), _rec(1, [1, 2, 7, 8, 3], [9], version=4)])
    assert chain.versions_of_tokens() == [3, 3, -1, 4]
    s = Sample(chain.prompt_ids, chain.completion_ids, chain.logprobs, chain.loss_mask, {},
               policy_version=3, token_versions=chain.versions_of_tokens())
    validate_sample(s, 0)
    assert s.version_span == (3, 4)


def test_stitch_branches_per_choice_and_continues_the_branch_that_was_used():
    recs = [_rec(0, [1], [2], [3]), _rec(1, [1, 3, 4], [5])]
    chains = stitch(recs)
    assert [c.ids for c in chains] == [[1, 2], [1, 3, 4, 5]]
    assert chains[1].calls == [(0, 1), (1, 0)] and chains[1].loss_mask == [1, 0, 1]
