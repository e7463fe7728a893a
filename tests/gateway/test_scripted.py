"""Tool calls, reasoning and history rewrites with a tiny model fine-tuned to answer scripted turns."""
import json

import openai

from trajkit.gateway.export import session_hermes_rows, session_samples
from trajkit.gateway.stitch import stitch
from trajkit.traces.hermes import parse_row

from ..traces.templates import QWEN3_STYLE
from .conftest import CHAT_CONV, TOOL_CONV, TOOLS


def _decode(tok, ids):
    return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def _ask(url, key, messages, tools=None, stream=False):
    c = openai.OpenAI(base_url=url, api_key=key, max_retries=0)
    kwargs = {"tools": tools} if tools else {}
    if stream:
        chunks = list(c.chat.completions.create(model="tiny", messages=messages, temperature=0, max_tokens=150,
                                                stream=True, **kwargs))
        return chunks
    return c.chat.completions.create(model="tiny", messages=messages, temperature=0, max_tokens=150, **kwargs)


def test_a_tool_call_round_trip_parses_stitches_and_exports(scripted_server):
    gw, url = scripted_server()
    first = _ask(url, "s-tool", TOOL_CONV[:1], TOOLS)
    msg = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls"
    assert msg.reasoning_content == "I will run ls." and msg.content is None
    assert [(c.function.name, json.loads(c.function.arguments)) for c in msg.tool_calls] == [("terminal", {"command": "ls"})]
    history = TOOL_CONV[:1] + [msg.model_dump(exclude_none=True)] + [
        {**TOOL_CONV[2], "tool_call_id": msg.tool_calls[0].id}]
    second = _ask(url, "s-tool", history, TOOLS)
    assert second.choices[0].message.content == "There is one file: a.txt."
    assert second.choices[0].message.reasoning_content == "Found it."

    session = gw.sessions.find("s-tool")
    [chain] = stitch(session.records)  # the template renders the call back token for token: no fork
    sampled = [t for r in session.records for t in r.choices[0].token_ids]
    assert [t for t, m in zip(chain.completion_ids, chain.loss_mask) if m] == sampled
    conversation = gw.tokenizer.apply_chat_template(history + [second.choices[0].message.model_dump(exclude_none=True)],
                                                    tools=TOOLS, tokenize=False)
    assert _decode(gw.tokenizer, chain.ids) == conversation.removesuffix("\n")
    [row] = session_hermes_rows(session)
    trace = parse_row(row)
    assert [m.role for m in trace.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert trace.messages[2].tool_calls[0].arguments == {"command": "ls"} and "terminal" in trace.tools
    assert trace.messages[3].tool_responses[0].result == {"output": "a.txt", "exit_code": 0}
    assert session_samples(session)[0]["loss_mask"] == chain.loss_mask


def test_streamed_tool_calls_and_reasoning(scripted_server):
    _, url = scripted_server()
    chunks = _ask(url, "s-stream", TOOL_CONV[:1], TOOLS, stream=True)
    deltas = [ch.choices[0].delta for ch in chunks if ch.choices]
    assert "".join(getattr(d, "reasoning_content", None) or "" for d in deltas) == "I will run ls."
    calls = [c for d in deltas for c in (d.tool_calls or [])]
    assert [(c.index, c.function.name, c.function.arguments) for c in calls] == [(0, "terminal", '{"command": "ls"}')]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def _two_user_turns(url, key):
    first = _ask(url, key, CHAT_CONV[:1])
    assert first.choices[0].message.content == "Hello!" and first.choices[0].message.reasoning_content == "Greet."
    return _ask(url, key, CHAT_CONV[:1] + [first.choices[0].message.model_dump(exclude_none=True)] + CHAT_CONV[2:3])


def test_chatml_keeps_history_so_the_chain_does_not_fork(scripted_server):
    gw, url = scripted_server()
    assert _two_user_turns(url, "s-chatml").choices[0].message.content == "Hello again!"
    chains = stitch(gw.sessions.find("s-chatml").records)
    assert len(chains) == 1 and chains[0].fork_at is None


def test_a_template_that_drops_old_reasoning_forks_the_chain(scripted_server):
    gw, url = scripted_server(QWEN3_STYLE)
    _two_user_turns(url, "s-qwen3")
    records = gw.sessions.find("s-qwen3").records
    chains = stitch(records)
    assert len(chains) == 2
    assert chains[0].ids == records[0].prompt_ids + records[0].choices[0].token_ids
    assert chains[1].prompt_ids == records[1].prompt_ids and chains[1].loss_mask == [1] * len(chains[1].completion_ids)
    think = gw.tokenizer.encode("<think>", add_special_tokens=False)
    at = chains[1].fork_at["token"]
    assert chains[0].ids[at:at + len(think)] == think  # the fork is where the old reasoning was dropped
