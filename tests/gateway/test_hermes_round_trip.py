"""One Hermes layout: what the gateway trains on == what ``trajkit traces export`` writes for it, byte for byte.

For a conversation whose assistant turns are given as the text the model wrote, the gateway's own pieces build
what it would record: its renderer writes each prompt (SmolLM2's content-only ChatML: inline Hermes text), its
format parses each reply into the message it returns, the records are stitched into the training chain
(:func:`trajkit.gateway.stitch.stitch`) and exported as a Hermes row (:func:`session_hermes_rows`). Only the
sampling is replaced: the "sampled" ids are the tokenizer's ids of the written text (``test_scripted.py`` runs
the same path with a real model sampling under trajkit's own template). Under trajkit's own (structured)
template too. The row then goes through the real
``trajkit traces export --format tokens`` and its ids and trained positions must equal the chain's, and its
``gpt`` turns must be the model's texts. Conversations: the real Hermes row of the shared fixtures, and a
hand-written one (an empty think, two calls in one turn, two results in one tool turn, a turn without think,
a plain-text result, several user turns).
"""
import json

import pytest
from transformers import AutoTokenizer

from trajkit.cli.main import main
from trajkit.gateway.export import session_hermes_rows
from trajkit.gateway.formats import resolve_format
from trajkit.gateway.parse import NOT_REPRODUCIBLE
from trajkit.gateway.render import ChatRenderer
from trajkit.gateway.sessions import CallRecord, ChoiceRecord, Session
from trajkit.gateway.stitch import stitch
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.traces.hermes_text import hermes_conversation, parse_envelope, parse_tool_turn

from ..conftest import _load_real

TOOLS = [{"type": "function", "function": {"name": n, "description": d, "parameters": {
    "type": "object", "properties": {k: {"type": "string"}}, "required": [k]}}}
    for n, d, k in [("terminal", "Run a shell command.", "command"), ("read_file", "Read a file.", "path")]]
CALL_LS = '<tool_call>\n{"name": "terminal", "arguments": {"command": "ls"}}\n</tool_call>'
CALL_READ = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call>'
HAND = [  # (role, text): assistant texts are what the model wrote; tool texts are the results' contents
    ("system", "You are a careful agent."),
    ("user", "What is in the folder, and what does a.txt say?"),
    ("assistant", "<think>\n\n</think>\n" + CALL_LS + "\n" + CALL_READ),  # empty think, two calls, no content
    ("tool", '{"output": "a.txt", "exit_code": 0}'),
    ("tool", "hello"),  # a plain-text result
    ("assistant", "<think>\nBoth came back.\n</think>\nThe folder holds a.txt; it says hello."),
    ("user", "List it once more, quickly."),
    ("assistant", "Listing again.\n" + CALL_LS),  # no think block at all
    ("tool", '{"output": "a.txt", "exit_code": 0}'),
    ("user", "Thanks."),
    ("assistant", "<think>\n Done (a leading space is kept).\n</think>\nYou are welcome."),
]


def _gateway_parts(tok):
    renderer = ChatRenderer.for_tokenizer(tok)
    fmt, _ = resolve_format("auto", tok, renderer.rendering.mode)
    return renderer, fmt


def _session(tok, conversation: list[tuple[str, str]], tools) -> tuple[Session, list[str], list[dict]]:
    """The records the gateway makes for ``conversation`` (one call per assistant turn); also the texts and
    the whole conversation as the harness holds it (replies as the gateway returned them)."""
    renderer, fmt = _gateway_parts(tok)
    eos = tok.eos_token
    session, history, texts, calls = Session("s", "m"), [], [], []
    for role, text in conversation:
        if role == "tool":  # the k-th result after a turn answers its k-th call
            k = len(history) - 1 - max(i for i, m in enumerate(history) if m["role"] == "assistant")
            history.append({"role": "tool", "tool_call_id": calls[k]["id"], "content": text})
            continue
        if role != "assistant":
            history.append({"role": role, "content": text})
            continue
        prompt = renderer.text(history, tools)
        parsed = fmt.parse(text, f"s:{len(session.records)}:0")
        assert not [d for d in parsed.diagnostics if d["code"] == NOT_REPRODUCIBLE], (text, parsed.diagnostics)
        last = parsed.message()
        calls = last.get("tool_calls") or []
        sampled = tok.encode(text + eos, add_special_tokens=False)
        # what the gateway checks before it returns the message: the render of the history with it goes on
        # with the sampled text (else the next prompt would not extend the sampled ids)
        assert renderer.text(history + [last], tools, generation=False).startswith(prompt + text + eos)
        choice = ChoiceRecord(sampled, [-1.0] * len(sampled), "stop", text, message=last)
        session.add(CallRecord(len(session.records), "chat", "m", tok.encode(prompt, add_special_tokens=False),
                               [choice], 0, {}, messages=list(history), tools=tools))
        history.append(last)
        texts.append(text)
    return session, texts, history


def _export(tmp_path, row, folder) -> dict:
    src, out = tmp_path / "row.jsonl", tmp_path / "tokens.jsonl"
    src.write_text(json.dumps(row, ensure_ascii=False) + "\n")
    assert main(["traces", "export", str(src), "--format", "tokens", "--tokenizer", folder, "--out", str(out),
                 "--max-length", "32768", "-q"]) == 0
    [example] = [json.loads(line) for line in out.read_text().splitlines()]
    return example


def _round_trip(tmp_path, folder, conversation, tools, mode="inline"):
    tok = AutoTokenizer.from_pretrained(folder)
    assert _gateway_parts(tok)[0].rendering.mode == mode
    session, texts, history = _session(tok, conversation, tools)
    [chain] = stitch(session.records)  # no fork: every reply renders back token for token
    [row] = session_hermes_rows(session)
    # inline, the gateway writes Hermes text: the row's gpt turns are the model's own bytes; a structured
    # template writes its own glue after </think> (trajkit's: two newlines), the row Hermes text's one
    hermes = [t.replace("</think>\n\n", "</think>\n", 1) if mode == "structured" else t for t in texts]
    assert [t["value"] for t in row["conversations"] if t["from"] == "gpt"] == hermes
    example = _export(tmp_path, row, folder)
    decode = lambda ids: tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)  # noqa: E731
    # byte for byte, and as ids under the tokenizer; the export goes on with the template's newline after the
    # last end-of-turn token (glue the model never samples: untrained)
    assert decode(example["input_ids"]) == decode(chain.ids) + "\n"
    assert example["input_ids"] == chain.ids + tok.encode("\n", add_special_tokens=False)
    # the same tokens trained, except the template's newline after each end-of-turn token: the SFT export
    # trains a turn through its end-of-turn glue (trajkit.traces.export.tokenize), RL only what the model sampled
    mask = [0] * len(chain.prompt_ids) + chain.loss_mask + [0]
    ids = example["input_ids"]
    glue = [int(i > 0 and mask[i - 1] == 1 and mask[i] == 0 and ids[i - 1] == tok.eos_token_id
                and decode(ids[i:i + 1]) == "\n") for i in range(len(ids))]
    assert [int(label != -100) for label in example["labels"]] == [m | g for m, g in zip(mask, glue)]
    assert sum(glue) == len(texts)
    assert [decode([i for i, m in zip(chain.ids, mask) if m])] == ["".join(t + tok.eos_token for t in texts)]
    return row, history


def test_a_hand_written_conversation_trains_what_the_export_writes(tmp_path, smollm2_tokenizer_folder):
    row, _ = _round_trip(tmp_path, smollm2_tokenizer_folder, HAND, TOOLS)
    tool_turns = [t["value"] for t in row["conversations"] if t["from"] == "tool"]
    assert len(tool_turns) == 2  # the two results after the first turn are ONE tool turn
    envelopes = [parse_envelope(b) for b in parse_tool_turn(tool_turns[0])]
    assert [(e["name"], e["content"]) for e in envelopes] == [("terminal", {"output": "a.txt", "exit_code": 0}),
                                                              ("read_file", "hello")]
    system = row["conversations"][0]["value"]
    assert system.startswith("You are a careful agent.\n\nYou are a function calling AI model.")


def test_under_trajkits_own_template_the_export_renders_the_trained_tokens_again(tmp_path):
    """Structured: the template renders reasoning, calls and results itself, with two newlines after
    </think>; the model writes that layout, the row has Hermes text's, and the export gives the tokens back.
    (Not the leading space of a reasoning: the structured export strips reasoning, as ``Message.think`` does.)"""
    byte_tokenizer().save_pretrained(tmp_path / "tok")
    conversation = [(r, t.replace("</think>\n", "</think>\n\n") if r == "assistant" else t) for r, t in HAND
                    if "leading space" not in t]
    _round_trip(tmp_path, str(tmp_path / "tok"), conversation, TOOLS, mode="structured")


def test_the_real_hermes_row_goes_through_the_gateway_and_comes_back_byte_for_byte(
        tmp_path, request, smollm2_tokenizer_folder):
    source = _load_real(request, "kimi-row-0c699abf.json")
    turns = source["conversations_preview"]
    conversation = []
    for t in turns:
        if t["from"] == "tool":  # the results as the harness sends them: one tool message each
            for env in map(parse_envelope, parse_tool_turn(t["value"])):
                conversation.append(("tool", json.dumps(env["content"], ensure_ascii=False)))
        else:
            conversation.append(({"system": "system", "human": "user", "gpt": "assistant"}[t["from"]], t["value"]))
    system = turns[0]["value"]  # the row's tools field is a cut preview; the system prompt lists them all
    tools = json.loads(system[system.index("<tools>\n") + 8:system.index("\n</tools>")])
    row, history = _round_trip(tmp_path, smollm2_tokenizer_folder, conversation, tools)
    assert row["conversations"] == turns[:-1]  # the export: through the last reply the gateway returned
    # and with the results the harness sent after it; the call ids are the gateway's (the source's are kimi's)
    ours = [c["id"] for m in history if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    theirs = [parse_envelope(b)["tool_call_id"] for t in turns if t["from"] == "tool"
              for b in parse_tool_turn(t["value"])]
    written = hermes_conversation(history, tools)
    for a, b in zip(ours, theirs, strict=True):
        written = [{**t, "value": t["value"].replace(json.dumps(a), json.dumps(b))} for t in written]
    assert written == turns
