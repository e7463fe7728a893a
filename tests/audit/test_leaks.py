"""Leak checks: a planted eval set (one copied, two paraphrased train items) is flagged item by item, its
clean twin passes, and two independent corpora give no false positive."""
from __future__ import annotations

import json

import pytest

from tests.audit.corpora import corpus, write_jsonl
from trajkit.audit.config import LeakConfig
from trajkit.audit.items import Item, row_item
from trajkit.audit.leaks import (audit_data, exact_check, item_overlap, jaccard, leak_checks, near_check,
                                 ngram_check, normalize_words, shingles, _ngram_index)
from trajkit.errors import ConfigError, InputError

TRAIN = corpus(seed=1, n=200, prefix="train")
CLEAN_EVAL = corpus(seed=2, n=40, prefix="eval")
LONG = next(i for i, r in enumerate(TRAIN) if len((r["question"] + " " + r["answer"]).split()) >= 56)


def _items(rows):
    return [row_item(r, f"x:{i + 1}") for i, r in enumerate(rows)]


def planted_eval() -> list[dict]:
    """The clean eval set plus: an exact copy (case and punctuation changed), a paraphrase that rewrites
    the first two words of the question but keeps the answer (answer covered by 13-grams), and one whose
    last question word differs (a near-duplicate of a long item; the answer is not covered)."""
    copied = dict(TRAIN[3], id="copied", question=TRAIN[3]["question"].upper().replace("?", "!"))
    q = TRAIN[7]["question"].split()
    rewritten = dict(TRAIN[7], id="rewritten", question=" ".join(["Please", "kindly"] + q[2:]))
    q = TRAIN[LONG]["question"].split()
    near = dict(TRAIN[LONG], id="near", question=" ".join(q[:-1] + ["different?"]))
    return CLEAN_EVAL + [copied, rewritten, near]


def test_normalisation_is_lm_evals():
    assert normalize_words("The CAT's  hat,\tisn't it?") == ["the", "cats", "hat", "isnt", "it"]


def test_planted_leaks_are_each_flagged_and_named():
    checks = {c.id: c for c in leak_checks(_items(TRAIN), _items(planted_eval()))}
    assert checks["leak.exact"].verdict == "FAIL"
    assert checks["leak.exact"].items == ["copied = train3 (prompt+answer)"]
    ngram = checks["leak.ngram"]
    assert ngram.verdict == "FAIL" and ngram.statistic == 3
    by_id = {item.split(":")[0]: item for item in ngram.items}
    assert by_id.keys() == {"copied", "rewritten", "near"}
    assert "covers the answer" in by_id["rewritten"] and "from train7" in by_id["rewritten"]
    assert "question only" in by_id["near"]
    words = len(normalize_words(TRAIN[7]["question"] + " " + TRAIN[7]["answer"]))
    assert f"span of {words - 2} words" in by_id["rewritten"]  # all but the two rewritten words
    near_ids = [item.split(" ~ ")[0] for item in checks["leak.near"].items]
    assert checks["leak.near"].verdict == "WARN" and "near" in near_ids and "copied" in near_ids


def test_clean_twin_passes_every_check():
    checks = leak_checks(_items(TRAIN), _items(CLEAN_EVAL))
    assert [(c.id, c.verdict, c.statistic, c.items) for c in checks] == [
        ("leak.exact", "PASS", 0, []), ("leak.ngram", "PASS", 0, []), ("leak.near", "PASS", 0, [])]


def test_false_positive_rate_on_independent_corpora_is_zero():
    """Two corpora of different seeds (1000 train, 300 eval rows): no eval item is flagged (FPR 0/300).
    docs/audit.md quotes this number."""
    train, evals = _items(corpus(seed=10, n=1000, prefix="a")), _items(corpus(seed=11, n=300, prefix="b"))
    flagged = {item.split(" ")[0].rstrip(":") for c in leak_checks(train, evals) for item in c.items}
    assert flagged == set()


def test_longest_span_and_answer_cover_by_hand():
    """Train 'a b c d e f' and n = 3; eval prompt 'x a b c d' answer 'e' -> n-grams abc, bcd, cde match,
    covering words 2-6 (span 5) and the answer word e."""
    index = _ngram_index([Item("t", "a b c d", "e f")], 3)
    o = item_overlap(Item("e", "x a b c d", "e"), 3, index)
    assert (o.longest, o.covers_answer, o.train) == (5, True, "t")
    o = item_overlap(Item("e", "x a b c", "z"), 3, index)
    assert (o.longest, o.covers_answer) == (3, False)
    assert item_overlap(Item("e", "q r s", "t"), 3, index) is None


def test_short_items_use_the_short_n_and_tiny_ones_are_left_to_exact():
    train = [Item("t", "one two three four five six seven eight nine", "")]
    short = Item("e", "one two three four five six seven eight", "")  # 8 words: n = 8
    tiny = Item("f", "one two three", "")  # 3 words: not n-gram checked
    c = ngram_check(train, [short, tiny], LeakConfig())
    assert c.statistic == 1 and c.items[0].startswith("e: 8-gram") and "1 items under 8 words" in c.detail


def test_near_duplicates_are_confirmed_by_exact_jaccard():
    a, b = shingles("a b c d e f g", 5), shingles("a b c d e f h", 5)
    assert jaccard(a, b) == pytest.approx(2 / 4)  # {abcde, bcdef} shared of {abcde, bcdef, cdefg, cdefh}
    base = " ".join(f"w{i}" for i in range(60))
    train = [Item("t", base, "")]
    one_word = Item("e", base.replace("w59", "zz"), "")  # 56 shingles, 1 differs: J = 55/57
    c = near_check(train, [one_word], LeakConfig())
    assert c.verdict == "WARN" and c.items == [f"e ~ t (Jaccard {55 / 57:.3f})"]
    far = Item("f", base.replace("w10", "zz").replace("w30", "yy").replace("w50", "xx"), "")  # J = 41/71
    assert near_check(train, [far], LeakConfig()).verdict == "PASS"


def test_rows_of_every_supported_shape():
    hermes = {"id": "h1", "conversations": [{"from": "system", "value": "sys"}, {"from": "human", "value": "q?"},
                                            {"from": "gpt", "value": "a1"}, {"from": "tool", "value": "out"},
                                            {"from": "gpt", "value": "final"}]}
    assert row_item(hermes, "f:1") == Item("h1", "q?", "final")
    openai = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                           {"role": "assistant", "content": "yo"}]}
    assert row_item(openai, "f:2") == Item("f:2", "hi", "yo")
    prompt = {"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "2+2?"}], "answer": "4"}
    assert row_item(prompt, "f:3") == Item("f:3", "2+2?", "4")
    with pytest.raises(InputError, match="token export.*--tokenizer"):
        row_item({"input_ids": [1, 2]}, "f:4")


def test_token_export_rows_read_with_their_tokenizer():
    """A row of trajkit's own token export: its user turn is the prompt, its trained tokens the answer; the
    same conversation as a messages row gives the same normalised text, so the two are an exact match."""
    from trajkit.audit.labels import role_openers
    from trajkit.models.tokenizer import bpe_tokenizer
    from trajkit.traces.export.token_export import example_row
    from trajkit.traces.export.tokenize import tokenize_conversation

    tok = bpe_tokenizer()
    conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": TRAIN[0]["question"]},
            {"role": "assistant", "content": TRAIN[0]["answer"]}]
    row = example_row(tokenize_conversation(tok, conv)[0], 0)
    item = row_item(row, "x:1", tok, role_openers(tok))
    assert normalize_words(item.prompt) == normalize_words(TRAIN[0]["question"])
    assert normalize_words(item.answer) == normalize_words(TRAIN[0]["answer"])
    assert exact_check(_items(TRAIN[:3]), [item]).items == ["x:1 = train0 (prompt+answer)"]


def test_files_end_to_end_and_bad_input(tmp_path):
    train = write_jsonl(tmp_path / "train.jsonl", TRAIN[:20])
    evals = write_jsonl(tmp_path / "eval.jsonl", [dict(TRAIN[0], id=None)] + CLEAN_EVAL[:5])
    report = audit_data([train], [evals])
    assert report.exit_code == 1 and report.checks[0].items == [f"{evals}:1 = train0 (prompt+answer)"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "fine", "answer": "x"}\n{"nothing": 1}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2: no text field"):
        audit_data([train], [str(bad)])


def test_empty_items_are_not_duplicates_of_each_other():
    train = [Item("t", "", ""), Item("u", "some real words here", "")]
    assert exact_check(train, [Item("e", "", "")]).verdict == "PASS"


def test_config_validation_says_what_to_set():
    with pytest.raises(ConfigError, match="short_ngram"):
        LeakConfig(ngram=5, short_ngram=8)
    with pytest.raises(ConfigError, match="jaccard"):
        LeakConfig(jaccard=1.5)


def test_cli_exit_codes_and_json(tmp_path, capsys):
    from trajkit.cli.main import main

    train = write_jsonl(tmp_path / "train.jsonl", TRAIN[:30])
    clean = write_jsonl(tmp_path / "clean.jsonl", CLEAN_EVAL[:10])
    leaky = write_jsonl(tmp_path / "leaky.jsonl", CLEAN_EVAL[:10] + [TRAIN[5]])
    assert main(["audit", "data", "--train", train, "--eval", clean, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "PASS" and [c["id"] for c in out["checks"]] == ["leak.exact", "leak.ngram", "leak.near"]
    assert main(["audit", "data", "--train", train, "--eval", leaky]) == 1
    table = capsys.readouterr().out
    assert "leak.exact FAIL: train5 = train5 (prompt+answer)" in table and table.rstrip().endswith("verdict: FAIL")
    assert main(["audit", "data", "--train", train, "--eval", str(tmp_path / "nope.jsonl")]) == 2
    assert capsys.readouterr().err.startswith("trajkit: error: ")
    assert main(["audit", "data", "--train", train, "--eval", clean, "--jaccard", "2"]) == 2
