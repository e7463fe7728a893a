"""Label audit over real token exports (trajkit's own export of small conversations, BPE tokenizer):
the clean export passes; planted bugs (a trained tool turn, a trained system prompt, a double label
shift, a row repeated, a row truncated to nothing, an assistant turn left untrained) are each flagged."""
from __future__ import annotations

import json

import pytest

from trajkit.audit.labels import (IGNORE, Row, audit_labels, label_checks, load_rows, role_openers,
                                  turn_spans)
from trajkit.errors import InputError
from trajkit.models.tokenizer import bpe_tokenizer, save_tokenizer
from trajkit.traces.export.token_export import example_row
from trajkit.traces.export.tokenize import tokenize_conversation
from trajkit.traces.export.token_records import TokenizeConfig

TOK = bpe_tokenizer()
CONVERSATIONS = [
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is two plus two?"},
     {"role": "assistant", "content": "Four."}],
    [{"role": "user", "content": "List the files."},
     {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
     {"role": "tool", "content": "a.txt b.txt"}, {"role": "assistant", "content": "Two files: a.txt and b.txt."}],
]


def export_rows() -> list[dict]:
    cfg = TokenizeConfig(train_turns="all")
    return [example_row(ex, i) for i, conv in enumerate(CONVERSATIONS) for ex in tokenize_conversation(TOK, conv, config=cfg)]


def _rows(rows) -> list[Row]:
    return [Row(f"x:{i + 1}", r["input_ids"], r["labels"], r["turns"]) for i, r in enumerate(rows)]


def _by_id(checks):
    return {c.id: c for c in checks}


def test_openers_are_chatml_headers():
    assert {r: TOK.decode(ids) for r, ids in role_openers(TOK).items()} == {
        "system": "<|im_start|>system", "user": "<|im_start|>user", "assistant": "<|im_start|>assistant"}


def test_openers_of_a_llama3_style_template():
    """A header template with a BOS and special header tokens, as Llama 3 has: the openers are found too."""
    tok = bpe_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<|begin_of_text|>", "<|start_header_id|>",
                                                         "<|end_header_id|>", "<|eot_id|>"]})
    tok.chat_template = ("<|begin_of_text|>{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
                         "\n\n{{ m['content'] }}<|eot_id|>{% endfor %}")
    assert {r: tok.decode(ids) for r, ids in role_openers(tok).items()} == {
        r: f"<|start_header_id|>{r}<|end_header_id|>" for r in ("system", "user", "assistant")}


def test_clean_export_passes():
    rows = export_rows()
    assert len(rows) == 2
    checks = label_checks(_rows(rows), TOK)
    assert [(c.id, c.verdict, c.statistic) for c in checks] == [
        ("labels.alignment", "PASS", 1.0), ("labels.roles", "PASS", 0), ("labels.empty", "PASS", 0),
        ("labels.duplicates", "PASS", 0)]


def test_turns_are_attributed_as_the_tokenizer_renders_them():
    row = export_rows()[1]
    spans = turn_spans(row["input_ids"], role_openers(TOK))
    texts = [(role, TOK.decode(row["input_ids"][a:b])) for role, a, b in spans]
    assert [r for r, _ in texts] == ["user", "assistant", "user", "assistant"]
    assert "a.txt b.txt" in texts[2][1] and "<tool_response>" in texts[2][1]  # tool results: a user turn
    assert texts[3][1].startswith("\nTwo files") and texts[3][1].endswith("<|im_end|>\n")


def test_an_export_that_trains_the_tool_turn_fails():
    rows = export_rows()
    bad = dict(rows[1], labels=list(rows[1]["labels"]))
    text = TOK.decode(bad["input_ids"])
    at = text.index("a.txt b.txt")
    enc = TOK(text, add_special_tokens=False, return_offsets_mapping=True)
    hit = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if a < at + 11 and b > at]
    for i in hit:
        bad["labels"][i] = bad["input_ids"][i]
    roles = _by_id(label_checks(_rows([rows[0], bad]), TOK))["labels.roles"]
    assert roles.verdict == "FAIL" and roles.statistic == 1
    assert roles.items[0].startswith(f"x:2: {len(hit)} trained tokens in a user turn (token {hit[0]}: 'a.txt")


def test_a_trained_system_prompt_fails_and_an_untrained_turn_warns():
    rows = export_rows()
    sys_row = dict(rows[0], labels=list(rows[0]["input_ids"]))  # everything trained
    untrained = dict(rows[1], labels=list(rows[1]["labels"]))
    first_asst = next(s for s in turn_spans(untrained["input_ids"], role_openers(TOK)) if s[0] == "assistant")
    for i in range(first_asst[1], first_asst[2]):
        untrained["labels"][i] = IGNORE
    roles = _by_id(label_checks(_rows([sys_row, untrained]), TOK))["labels.roles"]
    assert roles.verdict == "FAIL"
    assert any("in a system turn" in i for i in roles.items) and any("in a user turn" in i for i in roles.items)
    assert roles.items[-1] == "x:2: 1 of 2 assistant turns meant to train have trained tokens"


def test_double_shift_fails():
    rows = export_rows()
    r = rows[0]
    shifted = [IGNORE] * len(r["labels"])
    for i, lab in enumerate(r["labels"]):
        if lab != IGNORE and i >= 1:
            shifted[i - 1] = lab  # labels[i-1] = input_ids[i]: shifted once already
    check = _by_id(label_checks(_rows([dict(r, labels=shifted)])))["labels.alignment"]
    trained = sum(1 for x in shifted if x != IGNORE)
    assert check.verdict == "FAIL" and check.items[0].startswith(f"x:1: labels already shifted (double shift) at ")
    assert check.statistic < 1.0 and f"of {trained} trained positions" in check.items[0]


def test_repeated_and_empty_rows_warn():
    rows = export_rows()
    empty = dict(rows[0], labels=[IGNORE] * len(rows[0]["labels"]))
    checks = _by_id(label_checks(_rows([rows[0], rows[1], rows[0], empty])))
    assert checks["labels.duplicates"].verdict == "WARN" and checks["labels.duplicates"].items == ["x:3 = x:1"]
    assert checks["labels.empty"].verdict == "WARN" and checks["labels.empty"].items == ["x:4"]


def test_the_wrong_tokenizer_is_unusable_input():
    rows = _rows(export_rows())
    from trajkit.models.tokenizer import byte_tokenizer

    with pytest.raises(InputError, match="beyond this tokenizer's 259 ids"):
        label_checks(rows, byte_tokenizer())
    small = [Row("x:1", [104, 105, 258], [IGNORE, 105, 258])]  # byte ids, no turn opener
    with pytest.raises(InputError, match="no turn opener"):
        label_checks(small, byte_tokenizer())


def test_files_and_cli(tmp_path, capsys):
    from trajkit.cli.main import main

    tok_dir = save_tokenizer(TOK, tmp_path / "tok")
    rows = export_rows()
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = load_rows([str(good)])
    assert loaded[1].where == f"{good}:2 (conversation 1, window 0)" and loaded[1].turns == rows[1]["turns"]
    assert audit_labels([str(good)], str(tok_dir)).exit_code == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(dict(rows[0], labels=list(rows[0]["input_ids"]))) + "\n")
    assert main(["audit", "labels", str(bad), "--tokenizer", str(tok_dir)]) == 1
    assert "labels.roles" in capsys.readouterr().out
    (tmp_path / "broken.jsonl").write_text('{"input_ids": [1, 2], "labels": [1]}\n')
    assert main(["audit", "labels", str(tmp_path / "broken.jsonl")]) == 2
    assert "broken.jsonl:1: field labels" in capsys.readouterr().err
    with pytest.raises(InputError):
        load_rows([str(tmp_path / "missing.jsonl")])


def test_smollm2_export_passes_and_a_trained_user_turn_fails(smollm2_tokenizer_folder):
    """The real SmolLM2 template (ChatML with a default system prompt): openers found, the clean export
    passes, the same rows with the user turn trained fail."""
    from trajkit.models.load import load_tokenizer

    tok = load_tokenizer(smollm2_tokenizer_folder)
    assert {r: tok.decode(ids) for r, ids in role_openers(tok).items()} == {
        "system": "<|im_start|>system", "user": "<|im_start|>user", "assistant": "<|im_start|>assistant"}
    conv = CONVERSATIONS[0][1:]  # no system message: the template adds its default one
    rows = [example_row(ex, 0) for ex in tokenize_conversation(tok, conv, config=TokenizeConfig(train_turns="all"))]
    assert [c.verdict for c in label_checks(_rows(rows), tok)] == ["PASS"] * 4
    spans = turn_spans(rows[0]["input_ids"], role_openers(tok))
    assert [r for r, _, _ in spans] == ["system", "user", "assistant"]
    _, a, b = spans[1]
    labels = [x if not a <= i < b else rows[0]["input_ids"][i] for i, x in enumerate(rows[0]["labels"])]
    roles = _by_id(label_checks(_rows([dict(rows[0], labels=labels)]), tok))["labels.roles"]
    assert roles.verdict == "FAIL" and f"{b - a} trained tokens in a user turn" in roles.items[0]
