"""Tokenizer audit: two folders that differ only in the chat template, or only in one special token's
id, are flagged on exactly that component; a copy and a re-save pass; non-canonical ids drift."""
from __future__ import annotations

import json
import shutil

import pytest

from trajkit.audit.labels import Row
from trajkit.audit.tokenizers import COMPONENTS, audit_tokenizers, components, drift, fingerprint
from trajkit.cli.main import main
from trajkit.errors import InputError
from trajkit.models.tokenizer import bpe_tokenizer, save_tokenizer

TOK = bpe_tokenizer()


@pytest.fixture
def folders(tmp_path):
    ref = save_tokenizer(TOK, tmp_path / "ref")
    copy = shutil.copytree(ref, tmp_path / "copy")
    resaved = save_tokenizer(bpe_tokenizer(), tmp_path / "resaved")
    template = shutil.copytree(ref, tmp_path / "template")
    path = template / "chat_template.jinja"
    path.write_text(path.read_text().replace("<|im_start|>assistant\\n", "<|im_start|>assistant\\n<think>\\n"))
    special = shutil.copytree(ref, tmp_path / "special")
    tj = json.loads((special / "tokenizer.json").read_text())
    im_start = next(t for t in tj["added_tokens"] if t["content"] == "<|im_start|>")
    im_start["id"] = 9999
    (special / "tokenizer.json").write_text(json.dumps(tj, indent=4))  # reformatted too: formatting is not a difference
    return {k: str(v) for k, v in dict(ref=ref, copy=copy, resaved=resaved, template=template, special=special).items()}


def _failing(report):
    return {c.id: c for c in report.checks if c.verdict != "PASS"}


def test_copy_and_resave_are_the_same_tokenizer(folders):
    report = audit_tokenizers([folders["ref"], folders["copy"], folders["resaved"]])
    assert [c.verdict for c in report.checks] == ["PASS"] * (1 + len(COMPONENTS))
    assert report.checks[0].statistic == 1


def test_only_the_chat_template_differs(folders):
    report = audit_tokenizers([folders["ref"], folders["template"]])
    bad = _failing(report)
    assert set(bad) == {"tokenizers.fingerprint", "tokenizers.chat_template"}
    item = bad["tokenizers.chat_template"].items[0]
    assert item.startswith(f"{folders['template']} vs {folders['ref']}: first difference at line ")
    assert "<think>" in item and report.exit_code == 1


def test_only_one_special_id_differs(folders):
    bad = _failing(audit_tokenizers([folders["ref"], folders["special"]]))
    assert set(bad) == {"tokenizers.fingerprint", "tokenizers.added_tokens", "tokenizers.special_tokens"}
    old = TOK.convert_tokens_to_ids("<|im_start|>")
    assert bad["tokenizers.added_tokens"].items == [
        f"{folders['special']} vs {folders['ref']}: '<|im_start|>' id {old}->9999"]
    assert "9999" in bad["tokenizers.special_tokens"].items[0]


def test_components_read_what_the_tokenizer_says(folders):
    parts = components(folders["ref"])
    assert parts["eos_ids"]["eos_token"] == TOK.eos_token_id
    assert parts["vocab"]["vocab"] == {k: v for k, v in TOK.get_vocab().items() if k in parts["vocab"]["vocab"]}
    assert len(parts["vocab"]["vocab"]) + sum(t["content"] not in parts["vocab"]["vocab"]
                                              for t in parts["added_tokens"]) == len(TOK)
    assert parts["chat_template"] == TOK.chat_template
    assert fingerprint({"a": 1, "b": 2}) == fingerprint({"b": 2, "a": 1}) != fingerprint({"a": 2, "b": 1})


def test_non_canonical_ids_drift():
    canonical = TOK.encode("the cat sat on the mat", add_special_tokens=False)
    split = TOK.encode("the cat sat on the m", add_special_tokens=False) + TOK.encode("at", add_special_tokens=False)
    assert TOK.decode(split) == TOK.decode(canonical) and split != canonical  # same text, other ids
    rows = [Row("r:1", canonical, canonical), Row("r:2", split, split)]
    first = next(i for i, (x, y) in enumerate(zip(canonical, split)) if x != y)
    assert drift(TOK, rows) == [("r:2", first)]


def test_cli_and_unusable_input(folders, tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    ids = TOK.encode("hello world", add_special_tokens=False)
    rows.write_text(json.dumps({"input_ids": ids, "labels": ids}) + "\n")
    assert main(["audit", "tokenizers", folders["ref"], folders["copy"], "--samples", str(rows), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["checks"][-1]["id"] == "tokenizers.drift" and out["checks"][-1]["statistic"] == 0
    assert main(["audit", "tokenizers", folders["ref"], folders["template"]]) == 1
    assert main(["audit", "tokenizers", folders["ref"], str(tmp_path)]) == 2
    assert "tokenizer.json: missing" in capsys.readouterr().err
    with pytest.raises(InputError, match="not a folder"):
        components(str(tmp_path / "nope"))
