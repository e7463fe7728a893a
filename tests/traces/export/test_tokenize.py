"""Token export (format b): prefix-rendered labels, think policies, windowing, mask checks, files.

Every expected value is derived independently of trajkit.traces.export.tokenize: hand-written rendered text,
string positions in the full render mapped through the tokenizer's offsets, transformers' own
``{% generation %}`` masks, and direct ``apply_chat_template`` calls on the windows.
"""
import json
import random

import pyarrow.parquet as pq
import pytest
from transformers import AutoTokenizer

from trajkit.config import from_dict
from trajkit.errors import ConfigError, InputError
from trajkit.models.tokenizer import build_tokenizer
from trajkit.traces.export.token_export import export_tokens
from trajkit.traces.export.tokenize import (
    IGNORE_INDEX,
    MaskCheckError,
    PrefixError,
    TokenizeConfig,
    Window,
    _Conversation,
    check_example,
    tokenize_conversation,
)

TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file.", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {"name": "terminal", "description": "Run a command.", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
]
SYSTEM = {"role": "system", "content": "You are a careful agent."}


def call(call_id, name, args):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


CONV = [
    SYSTEM,
    {"role": "user", "content": "Which port does staging use?"},
    {"role": "assistant", "reasoning_content": "Check the config and grep at once.", "content": "Looking.",
     "tool_calls": [call("c0", "read_file", {"path": "staging.yaml"}),
                    call("c1", "terminal", {"command": "grep -n port staging.yaml"})]},
    {"role": "tool", "tool_call_id": "c0", "name": "read_file", "content": "port: 8080"},
    {"role": "tool", "tool_call_id": "c1", "name": "terminal",
     "content": '{"output": "3: port: 8080", "exit_code": 0}'},
    {"role": "assistant", "reasoning_content": "Both say 8080.", "content": "Staging uses port 8080."},
]
# The two assistant turns as the template must render them (written by hand from the template's spec).
THINK1 = "<think>\nCheck the config and grep at once.\n</think>"
A1 = (THINK1 + "\n\nLooking.\n<tool_call>\n"
      '{"name": "read_file", "arguments": {"path": "staging.yaml"}}\n</tool_call>\n<tool_call>\n'
      '{"name": "terminal", "arguments": {"command": "grep -n port staging.yaml"}}\n</tool_call><|im_end|>\n')
A2 = "<think>\nBoth say 8080.\n</think>\n\nStaging uses port 8080.<|im_end|>\n"
HEADER = ("<|im_start|>system\nYou are a careful agent.\n\n# Tools\n\nYou can call the functions below. Their JSON "
          "schemas are inside <tools></tools>:\n<tools>\n" + "\n".join(json.dumps(t) for t in TOOLS)
          + "\n</tools>\n\nTo call a function, write one JSON object per call inside <tool_call></tool_call> tags:"
          '\n<tool_call>\n{"name": <function name>, "arguments": <arguments as a JSON object>}\n</tool_call>'
          "<|im_end|>\n")
FULL = (HEADER + "<|im_start|>user\nWhich port does staging use?<|im_end|>\n<|im_start|>assistant\n" + A1
        + "<|im_start|>user\n<tool_response>\nport: 8080\n</tool_response>\n<tool_response>\n"
        '{"output": "3: port: 8080", "exit_code": 0}\n</tool_response><|im_end|>\n<|im_start|>assistant\n' + A2)


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return build_tokenizer(tmp_path_factory.mktemp("tiny-tokenizer"))


@pytest.fixture
def tok(tok_dir):
    return AutoTokenizer.from_pretrained(tok_dir)


def trained_text(tok, ex):
    return tok.decode([t for t, y in zip(ex.input_ids, ex.labels) if y != IGNORE_INDEX],
                      skip_special_tokens=False)


def mask_from_spans(tok, text, spans):
    """1 for tokens inside a char span (offsets route); asserts no token straddles a span edge."""
    offsets = tok(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    out = []
    for s, e in offsets:
        inside = [a <= s and e <= b for a, b in spans]
        outside = [e <= a or s >= b for a, b in spans]
        assert all(i or o for i, o in zip(inside, outside)), (s, e)
        out.append(int(any(inside)))
    return out


# ---------------------------------------------------------------------------------------- tokenizer

def test_template_renders_the_hand_written_text(tok):
    assert tok.apply_chat_template(CONV, tools=TOOLS, tokenize=False) == FULL
    prompt = tok.apply_chat_template(CONV[:2], tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert prompt == FULL[:FULL.index(A1)]
    assert len(tok) <= 2048 and tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"


@pytest.mark.parametrize("text", ["", "plain words", "  lead and trail  ", "\n\n\n\t x \r\n", "é ü ß 東京 😀",
                                  "<|im_start|>user\nhi<|im_end|>", "<think></think><tool_call>{}</tool_call>",
                                  "\x00\x01 control", FULL])
def test_decode_encode_round_trip(tok, text):
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"], skip_special_tokens=False) == text


def test_round_trip_random_unicode(tok):
    rng = random.Random(0)
    alphabet = "ab \n\t{}\":<|>é東😀" + "".join(chr(rng.randrange(32, 0x3000)) for _ in range(50))
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        assert tok.decode(tok(text, add_special_tokens=False)["input_ids"], skip_special_tokens=False) == text


# ----------------------------------------------------------------------------------------- labels

def test_labels_equal_hand_derived_assistant_ranges(tok):
    [ex] = tokenize_conversation(tok, CONV, TOOLS, TokenizeConfig())
    assert ex.input_ids == tok(FULL, add_special_tokens=False)["input_ids"]
    s1, s2 = FULL.index(A1), FULL.index(A2)
    expected = mask_from_spans(tok, FULL, [(s1, s1 + len(A1)), (s2, s2 + len(A2))])
    assert [int(y != IGNORE_INDEX) for y in ex.labels] == expected
    assert all(y in (IGNORE_INDEX, t) for t, y in zip(ex.input_ids, ex.labels))
    assert trained_text(tok, ex) == A1 + A2
    assert ex.metadata.turns == [2, 5] and ex.metadata.trainable_tokens == sum(expected)


def test_labels_equal_transformers_generation_masks(tok):
    [ex] = tokenize_conversation(tok, CONV, TOOLS, TokenizeConfig())
    out = tok.apply_chat_template(CONV, tools=TOOLS, return_dict=True, return_assistant_tokens_mask=True)
    assert out["input_ids"] == ex.input_ids
    assert out["assistant_masks"] == [int(y != IGNORE_INDEX) for y in ex.labels]


def test_message_by_message_templating_gives_a_different_wrong_mask(tok):
    """The tutorial's approach: template each message alone, concatenate, mask assistant messages."""
    ids, mask = [], []
    for msg in CONV:
        piece = tok.apply_chat_template([msg], tools=TOOLS, tokenize=False)
        piece_ids = tok(piece, add_special_tokens=False)["input_ids"]
        ids += piece_ids
        mask += [int(msg["role"] == "assistant")] * len(piece_ids)
    [ex] = tokenize_conversation(tok, CONV, TOOLS, TokenizeConfig())
    ours = [int(y != IGNORE_INDEX) for y in ex.labels]
    assert ids != ex.input_ids and mask != ours
    wrong = tok.decode([t for t, m in zip(ids, mask) if m], skip_special_tokens=False)
    assert wrong != A1 + A2 and "# Tools" in wrong  # each lone assistant message re-renders the tools header


def test_anchored_prefix_check_agrees_with_full(tok):
    for policy in ("keep", "drop", "mask"):
        for turns in ("all", "last"):
            got = [tokenize_conversation(tok, CONV, TOOLS, TokenizeConfig(think_policy=policy, train_turns=turns,
                                                                          prefix_check=mode))
                   for mode in ("anchored", "full")]
            assert [(e.input_ids, e.labels) for e in got[0]] == [(e.input_ids, e.labels) for e in got[1]]


def test_anchored_counts_are_exact_at_random_cut_points(tok):
    conv = _Conversation(tok, CONV + [{"role": "user", "content": "\n\n  spaced\n\n\n"},
                                      {"role": "assistant", "content": "\n\nmerges"}], TOOLS, TokenizeConfig())
    r = conv.render_window(Window(1, 8, [2, 5, 7]))
    rng = random.Random(1)
    cuts = sorted(set(rng.randrange(1, len(r.text)) for _ in range(300)))
    truth = {}  # cut -> token count, where the prefix's own tokens are a prefix of the whole's tokens
    for c in cuts:
        ids = tok(r.text[:c], add_special_tokens=False)["input_ids"]
        if ids == r.ids[:len(ids)]:
            truth[c] = len(ids)
    assert 50 < len(truth) < len(cuts)  # both kinds of cut occur
    assert conv._anchored_counts(r, cuts) == truth


# ----------------------------------------------------------------------------------- think policies

def test_think_drop_removes_earlier_reasoning_from_input_and_labels(tok):
    [ex] = tokenize_conversation(tok, CONV, TOOLS, TokenizeConfig(think_policy="drop"))
    stripped = FULL.replace(THINK1 + "\n\n", "")
    assert ex.input_ids == tok(stripped, add_special_tokens=False)["input_ids"]
    assert trained_text(tok, ex) == A1.replace(THINK1 + "\n\n", "") + A2  # the last turn keeps its think


def test_think_mask_keeps_reasoning_as_context_without_loss(tok):
    [keep] = tokenize_conversation(tok, CONV, TOOLS, TokenizeConfig(think_policy="keep"))
    [mask] = tokenize_conversation(tok, CONV, TOOLS, TokenizeConfig(think_policy="mask"))
    assert mask.input_ids == keep.input_ids
    s = FULL.index(THINK1)
    think_tokens = sum(mask_from_spans(tok, FULL, [(s, s + len(THINK1))]))
    assert think_tokens > 5
    assert keep.metadata.trainable_tokens - mask.metadata.trainable_tokens == think_tokens
    assert trained_text(tok, mask) == A1.replace(THINK1, "") + A2


def test_train_turns_last_gives_one_example_per_turn(tok):
    examples = tokenize_conversation(tok, CONV, TOOLS, TokenizeConfig(train_turns="last"))
    assert [e.metadata.turns for e in examples] == [[2], [5]]
    assert [trained_text(tok, e) for e in examples] == [A1, A2]
    assert examples[0].input_ids == tok(FULL[:FULL.index(A1) + len(A1)], add_special_tokens=False)["input_ids"]
    assert [(e.metadata.window_index, e.metadata.num_windows) for e in examples] == [(0, 2), (1, 2)]


# Qwen3-like: reasoning is shown only for assistant turns after the last user message, and the last
# assistant turn always gets a think block (written for this test, not copied from Qwen).
STRIPPING_TEMPLATE = r"""
{%- set ns = namespace(last_user=-1) -%}
{%- for m in messages -%}{%- if m.role == "user" -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}
{%- for m in messages -%}
{%- if m.role == "assistant" -%}
{{- "<|im_start|>assistant\n" -}}
{%- set r = m.reasoning_content if m.reasoning_content is defined and m.reasoning_content else "" -%}
{%- if loop.index0 > ns.last_user and (loop.last or r) -%}{{- "<think>\n" + r + "\n</think>\n\n" -}}{%- endif -%}
{{- m.content + "<|im_end|>\n" -}}
{%- else -%}
{{- "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n" -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- "<|im_start|>assistant\n" -}}{%- endif -%}
"""
TWO_QUERIES = [SYSTEM, {"role": "user", "content": "first"},
               {"role": "assistant", "reasoning_content": "thinking one", "content": "one"},
               {"role": "user", "content": "second"},
               {"role": "assistant", "reasoning_content": "thinking two", "content": "two"}]


def test_history_rewriting_template_in_one_example_raises_a_clear_error(tok):
    tok.chat_template = STRIPPING_TEMPLATE
    for policy in ("keep", "drop"):
        with pytest.raises(PrefixError) as err:
            tokenize_conversation(tok, TWO_QUERIES, None, TokenizeConfig(think_policy=policy, train_turns="all"))
        assert err.value.message_index == 2 and "messages[2]" in str(err.value)
        assert "train_turns='auto' or 'query'" in str(err.value)


def test_auto_splits_a_history_rewriting_template_per_user_query(tok):
    """Every turn trained exactly once WITH its own reasoning; the history as the template renders it."""
    tok.chat_template = STRIPPING_TEMPLATE
    examples = tokenize_conversation(tok, TWO_QUERIES, None, TokenizeConfig(think_policy="keep"))
    assert [e.metadata.turns for e in examples] == [[2], [4]]
    assert [trained_text(tok, e) for e in examples] == ["<think>\nthinking one\n</think>\n\none<|im_end|>\n",
                                                         "<think>\nthinking two\n</think>\n\ntwo<|im_end|>\n"]
    inference = tok.apply_chat_template(TWO_QUERIES, tokenize=False)  # turn 2's reasoning stripped there
    assert examples[1].input_ids == tok(inference, add_special_tokens=False)["input_ids"]
    assert "thinking one" not in tok.decode(examples[1].input_ids)


def test_train_turns_last_matches_the_inference_view_of_a_stripping_template(tok):
    tok.chat_template = STRIPPING_TEMPLATE
    examples = tokenize_conversation(tok, TWO_QUERIES, None, TokenizeConfig(train_turns="last"))
    for ex, i in zip(examples, (2, 4)):
        inference = tok.apply_chat_template(TWO_QUERIES[:i + 1], tokenize=False)
        assert ex.input_ids == tok(inference, add_special_tokens=False)["input_ids"]
    assert "thinking one" not in tok.decode(examples[1].input_ids)
    assert [trained_text(tok, e) for e in examples] == ["<think>\nthinking one\n</think>\n\none<|im_end|>\n",
                                                         "<think>\nthinking two\n</think>\n\ntwo<|im_end|>\n"]


def test_a_token_merge_across_a_turn_boundary_gives_the_inference_view(tok):
    """"\n\nhello" after the ChatML glue "assistant\n" merges into one whitespace token, so no label can
    start where the prompt ends. The example is built as the model meets it: the prompt (with its
    generation prompt) encoded alone, then the turn's own tokens, only those trained (71f65ef raised)."""
    conv = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "\n\nhello"}]
    prompt = tok.apply_chat_template(conv[:1], tokenize=False, add_generation_prompt=True)
    turn = tok.apply_chat_template(conv, tokenize=False)[len(prompt):]
    whole = tok(prompt + turn, add_special_tokens=False)["input_ids"]
    prompt_ids, turn_ids = (tok(t, add_special_tokens=False)["input_ids"] for t in (prompt, turn))
    assert whole[:len(prompt_ids)] != prompt_ids  # the premise: the joint encoding merges across the boundary
    for mode in ("anchored", "full"):
        [ex] = tokenize_conversation(tok, conv, None, TokenizeConfig(prefix_check=mode))
        assert ex.input_ids == prompt_ids + turn_ids and ex.metadata.inference_view
        assert ex.labels == [IGNORE_INDEX] * len(prompt_ids) + turn_ids
        assert tok.decode(turn_ids) == turn == "\n\nhello<|im_end|>\n"


def test_a_merge_in_a_multi_turn_conversation_gives_one_inference_view_per_turn(tok):
    conv = CONV[:3] + [{"role": "user", "content": "and?"}, {"role": "assistant", "content": "\n\nmerges"}]
    examples = tokenize_conversation(tok, conv, TOOLS, TokenizeConfig(train_turns="all"))
    assert [e.metadata.turns for e in examples] == [[2], [4]]
    # once a conversation merged, each of its turns is one example built apart (prompt, then turn)
    assert [e.metadata.inference_view for e in examples] == [True, True]
    for ex, i in zip(examples, (2, 4)):
        prompt = tok.apply_chat_template(conv[:i], tools=TOOLS, tokenize=False, add_generation_prompt=True)
        turn = tok.apply_chat_template(conv[:i + 1], tools=TOOLS, tokenize=False)[len(prompt):]
        prompt_ids, turn_ids = (tok(t, add_special_tokens=False)["input_ids"] for t in (prompt, turn))
        assert ex.input_ids == prompt_ids + turn_ids and ex.labels == [IGNORE_INDEX] * len(prompt_ids) + turn_ids
    assert trained_text(tok, examples[1]) == "\n\nmerges<|im_end|>\n"


def test_bad_messages_raise_input_errors_naming_the_field(tok):
    with pytest.raises(InputError, match=r"messages\[1\]\.role"):
        tokenize_conversation(tok, [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}])
    with pytest.raises(InputError, match="non-empty list"):
        tokenize_conversation(tok, [])


def test_check_example_catches_misplaced_or_wrong_labels(tok):
    [ex] = tokenize_conversation(tok, CONV, TOOLS, TokenizeConfig())
    check_example(tok, ex, [A1, A2])
    first = next(j for j, y in enumerate(ex.labels) if y != IGNORE_INDEX)
    shifted = list(ex.labels)
    shifted[first - 1], shifted[first] = ex.input_ids[first - 1], shifted[first]
    ex.metadata.trainable_tokens += 1
    with pytest.raises(MaskCheckError):
        check_example(tok, type(ex)(ex.input_ids, shifted, ex.metadata), [A1, A2])
    ex.metadata.trainable_tokens -= 1
    wrong = list(ex.labels)
    wrong[first] = ex.input_ids[first] + 1
    with pytest.raises(MaskCheckError, match="labels differ"):
        check_example(tok, type(ex)(ex.input_ids, wrong, ex.metadata), [A1, A2])
    with pytest.raises(MaskCheckError):
        check_example(tok, ex, [A1])


# ---------------------------------------------------------------------------------------- windowing

def long_conversation(rounds=10, huge=(4,)):
    msgs = [SYSTEM, {"role": "user", "content": "Read every file."}]
    for k in range(rounds):
        reasoning = "long " * 400 if k in huge else f"Step {k}: read file {k} next."
        msgs.append({"role": "assistant", "reasoning_content": reasoning, "content": "",
                     "tool_calls": [call(f"c{k}", "read_file", {"path": f"f{k}.txt"})]})
        msgs.append({"role": "tool", "tool_call_id": f"c{k}", "name": "read_file", "content": f"line {k}\n" * 4})
    msgs.append({"role": "assistant", "content": "All files read."})
    return msgs


def n_tokens(tok, msgs):
    return len(tok.apply_chat_template(msgs, tools=TOOLS, tokenize=True, return_dict=False))


@pytest.mark.parametrize("policy", ["keep", "drop"])
def test_windowing_fits_keeps_every_turn_that_fits_and_fills_context(tok, policy):
    msgs = long_conversation()
    max_length = n_tokens(tok, [SYSTEM, msgs[1]]) + 180
    diagnostics = []
    examples = tokenize_conversation(tok, msgs, TOOLS, TokenizeConfig(max_length=max_length, think_policy=policy),
                                     diagnostics=diagnostics)
    turns = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    fits = {i for i in turns if n_tokens(tok, [SYSTEM, msgs[i]]) <= max_length}
    assert fits == set(turns) - {10}  # only the huge turn (round 4, message 10) cannot fit alone
    trained = [t for e in examples for t in e.metadata.turns]
    assert sorted(trained) == sorted(fits) and len(trained) == len(set(trained))
    assert [(d.kind, d.turns) for d in diagnostics] == [("turn_too_long", [10])]
    assert len(examples) > 2
    for ex in examples:
        m = ex.metadata
        assert len(ex.input_ids) == m.num_tokens <= max_length
        window = [SYSTEM] + msgs[m.message_start:m.message_end]
        if policy == "drop":
            window = [{k: v for k, v in w.items() if k != "reasoning_content"} if w["role"] == "assistant"
                      and j < len(window) - 1 else w for j, w in enumerate(window)]
        assert ex.input_ids == tok.apply_chat_template(window, tools=TOOLS, return_dict=False)
        if m.message_start > 1:  # as much preceding context as fits: one more message would not
            assert n_tokens(tok, window[:1] + msgs[m.message_start - 1:m.message_start] + window[1:]) > max_length
        assert m.trainable_tokens == sum(y != IGNORE_INDEX for y in ex.labels) > 0


def test_windowing_off_drops_an_overlong_conversation_whole(tok):
    msgs = long_conversation()
    diagnostics = []
    config = TokenizeConfig(max_length=n_tokens(tok, msgs) - 1, windowing=False)
    assert tokenize_conversation(tok, msgs, TOOLS, config, diagnostics=diagnostics) == []
    assert [d.kind for d in diagnostics] == ["window_too_long"] and len(diagnostics[0].turns) == 11
    [ex] = tokenize_conversation(tok, msgs, TOOLS, TokenizeConfig(max_length=n_tokens(tok, msgs), windowing=False))
    assert len(ex.metadata.turns) == 11


def test_windowing_with_one_turn_per_example(tok):
    msgs = long_conversation(rounds=4, huge=())
    max_length = n_tokens(tok, msgs[:6])
    examples = tokenize_conversation(tok, msgs, TOOLS, TokenizeConfig(max_length=max_length, train_turns="last"))
    assert [e.metadata.turns for e in examples] == [[2], [4], [6], [8], [10]]
    assert all(len(e.input_ids) <= max_length for e in examples)
    assert examples[0].metadata.message_start == 1 and examples[-1].metadata.message_start > 1


def test_min_trainable_tokens_drops_small_examples(tok):
    diagnostics = []
    config = TokenizeConfig(train_turns="last", min_trainable_tokens=30)
    examples = tokenize_conversation(tok, CONV, TOOLS, config, diagnostics=diagnostics)
    assert [e.metadata.turns for e in examples] == [[2]]  # A2 is shorter than 30 tokens
    assert [(d.kind, d.turns) for d in diagnostics] == [("below_min_trainable", [5])]


def real_messages(row):
    """The real row (system prompt with 15 tools, user, gpt with think + call, tool) as OpenAI messages."""
    conv = row["conversations_preview"]
    system = conv[0]["value"]
    start = system.index("<tools>\n") + len("<tools>\n")
    tools = json.loads(system[start:system.index("\n</tools>", start)])
    gpt = conv[2]["value"]
    think = gpt[gpt.index("<think>\n") + 8:gpt.index("\n</think>")]
    body = json.loads(gpt[gpt.index("<tool_call>\n") + 12:gpt.index("\n</tool_call>")])
    resp = conv[3]["value"]
    result = json.loads(resp[resp.index("<tool_response>\n") + 16:resp.index("\n</tool_response>")])
    return [{"role": "system", "content": system}, {"role": "user", "content": conv[1]["value"]},
            {"role": "assistant", "reasoning_content": think, "content": "",
             "tool_calls": [call("functions.session_search:0", body["name"], body["arguments"])]},
            {"role": "tool", "tool_call_id": result["tool_call_id"], "name": result["name"],
             "content": json.dumps(result["content"])}], tools, think, body


def test_real_row_with_its_26k_system_prompt(tok, real_row):
    msgs, tools, think, body = real_messages(real_row)
    assert len(msgs[0]["content"]) == 25879 and len(tools) == 15
    [ex] = tokenize_conversation(tok, msgs, tools, TokenizeConfig(max_length=100_000))
    assert trained_text(tok, ex) == (f"<think>\n{think}\n</think>\n\n<tool_call>\n"
                                     f'{{"name": "{body["name"]}", "arguments": {json.dumps(body["arguments"])}}}'
                                     "\n</tool_call><|im_end|>\n")
    assert ex.metadata.message_end == 3  # the trailing tool message trains nothing and is left out
    tight = len(ex.input_ids) - 1
    [short] = tokenize_conversation(tok, msgs, tools, TokenizeConfig(max_length=tight))
    assert short.metadata.message_start == 2 and len(short.input_ids) <= tight
    assert trained_text(tok, short) == trained_text(tok, ex)


# ------------------------------------------------------------------------------------- config, files

def test_config_validation_names_the_parameter():
    with pytest.raises(ConfigError, match="max_length"):
        TokenizeConfig(max_length=0)
    with pytest.raises(ConfigError, match="think_policy"):
        TokenizeConfig(think_policy="hide")
    with pytest.raises(ConfigError, match="did you mean 'think_policy'"):
        from_dict(TokenizeConfig, {"think_polcy": "drop"})


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_export_writes_checked_examples_and_a_true_summary(tok, tok_dir, tmp_path, suffix):
    msgs = long_conversation()
    bad = [{"role": "user", "content": "hi"}, {"role": "robot", "content": "hello"}]
    config = TokenizeConfig(max_length=n_tokens(tok, [SYSTEM, msgs[1]]) + 180)
    conversations = [(CONV, TOOLS), (bad, None), (msgs, TOOLS), ([{"role": "user", "content": "x"}], None)]
    out = tmp_path / f"tokens{suffix}"
    summary = export_tokens(conversations, tok_dir, config, out, progress=False)
    expected = [(k, e) for k, (m, t) in enumerate(conversations) if k != 1
                for e in tokenize_conversation(tok, m, t, config)]
    if suffix == ".parquet":
        table = pq.read_table(out)
        assert str(table.schema.field("input_ids").type) == "list<element: int32>"
        rows = table.to_pylist()
    else:
        rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["conversation"], r["input_ids"], r["labels"], r["turns"]) for r in rows] == \
        [(k, e.input_ids, e.labels, e.metadata.turns) for k, e in expected]
    assert (summary.conversations, summary.skipped_conversations, summary.empty_conversations) == (4, 1, 1)
    assert summary.examples == len(rows) and summary.windowed_conversations == 1
    assert summary.tokens == sum(len(r["input_ids"]) for r in rows)
    assert summary.trainable_tokens == sum(r["trainable_tokens"] for r in rows)
    assert summary.trained_turns + summary.dropped_turns == 2 + 11
    assert summary.dropped_by_kind == {"turn_too_long": 1} and "conversation 1:" in summary.skipped[0]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp file left


def test_export_strict_raises_with_the_conversation_index(tok_dir, tmp_path):
    bad = [{"role": "user", "content": "hi"}, {"role": "robot", "content": "hello"}]
    with pytest.raises(InputError, match=r"^row 2: field messages\[1\]\.role"):
        export_tokens([(CONV, TOOLS), (CONV, TOOLS), (bad, None)], tok_dir, None, tmp_path / "t.jsonl",
                      strict=True, progress=False)
    assert [p.name for p in tmp_path.iterdir() if "t.jsonl" in p.name] == []  # neither output nor temp
    with pytest.raises(ConfigError, match="must end in"):
        export_tokens([], tok_dir, None, tmp_path / "t.csv", progress=False)
    with pytest.raises(ConfigError, match="looks like a hub name; trajkit reads local folders only"):
        export_tokens([], "Qwen/Qwen3-8B", None, tmp_path / "t.jsonl", progress=False)


def test_export_with_worker_processes_writes_the_same_file(tok_dir, tmp_path):
    conversations = [(CONV, TOOLS), ([{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}],
                                     None), (long_conversation(rounds=3, huge=()), TOOLS)] * 3
    one = export_tokens(conversations, tok_dir, None, tmp_path / "one.jsonl", progress=False)
    two = export_tokens(conversations, tok_dir, None, tmp_path / "two.jsonl", progress=False, workers=2)
    assert (tmp_path / "one.jsonl").read_text() == (tmp_path / "two.jsonl").read_text()
    assert one.examples == two.examples == 6 and one.skipped_conversations == two.skipped_conversations == 3


# --------------------------------------------------------------- window planning on hand-made costs

def docstring_costs():
    """The worked example of trajkit.traces.export.windowing: head 10 tokens, messages 1..6."""
    from trajkit.traces.export.windowing import MessageCosts
    costs = [0, 5, 12, 8, 12, 8, 12]
    return MessageCosts(10, costs, costs)


class FakeBuild:
    """An exact build whose true length is the estimate plus ``bias`` tokens; counts the builds."""

    def __init__(self, costs, bias=0):
        self.costs, self.bias, self.calls = costs, bias, 0

    def __call__(self, window):
        self.calls += 1
        return type("Built", (), {"ids": [0] * (self.costs.window(window.start, window.end) + self.bias)})()


def plan(costs, build, max_length, **kw):
    from trajkit.traces.export.windowing import Dropped, iter_windows
    out = []
    for item in iter_windows([2, 4, 6], 1, max_length, build, costs, **kw):
        out.append(("drop", item.turns) if isinstance(item, Dropped)
                   else (item[0].start, item[0].end, item[0].trainable))
    return out


def test_window_plan_of_the_docstring_example():
    costs = docstring_costs()
    assert plan(costs, FakeBuild(costs), 40) == [(1, 3, [2]), (3, 5, [4]), (5, 7, [6])]
    # 42: turns 2 and 4 share a window (10+12+8+12), m1 no longer fits (47); turn 6 gets m4..m5 as context
    assert plan(costs, FakeBuild(costs), 42) == [(2, 5, [2, 4]), (4, 7, [6])]
    assert plan(costs, FakeBuild(costs), 100) == [(1, 7, [2, 4, 6])]
    assert plan(costs, FakeBuild(costs), 40, max_turns=1) == [(1, 3, [2]), (3, 5, [4]), (5, 7, [6])]


def test_exact_builds_correct_wrong_estimates():
    costs = docstring_costs()
    under = FakeBuild(costs, bias=+4)  # the estimate is 4 tokens short: context must shrink
    assert plan(costs, under, 27) == [(2, 3, [2]), (4, 5, [4]), (6, 7, [6])]
    short = FakeBuild(costs, bias=+1)  # no context to give up: the last trainable turn moves on
    assert plan(costs, short, 42) == [(2, 3, [2]), (4, 5, [4]), (5, 7, [6])]
    assert plan(costs, FakeBuild(costs), 29) == [(1, 3, [2]), (4, 5, [4]), (6, 7, [6])]
    over = FakeBuild(costs, bias=-5)  # the estimate is 5 tokens long: context grows into the free room
    assert plan(costs, over, 29) == [(1, 3, [2]), (3, 5, [4]), (5, 7, [6])]


def test_turns_are_dropped_only_on_exact_builds_or_far_over_estimates():
    from trajkit.traces.export.windowing import exact_margin
    costs = docstring_costs()
    near = FakeBuild(costs, bias=-1)  # estimate 22 > 21 but truly 21: built exactly, kept
    assert plan(costs, near, 21) == [(2, 3, [2]), (4, 5, [4]), (6, 7, [6])]
    truly_over = FakeBuild(costs, bias=+1)
    assert plan(costs, truly_over, 22) == [("drop", [2]), ("drop", [4]), ("drop", [6])]
    assert truly_over.calls == 3
    far = FakeBuild(costs)
    assert exact_margin(10) == 64 and plan(costs, far, 22 - 65) == [("drop", [2]), ("drop", [4]), ("drop", [6])]
    assert far.calls == 0


def test_auto_split_follows_a_template_replaced_in_place(tok):
    from trajkit.traces.export.tokenize import auto_split

    assert auto_split(tok) == "all"  # the tiny template renders history verbatim
    tok.chat_template = STRIPPING_TEMPLATE  # same tokenizer object, another template
    assert auto_split(tok) == "query"
