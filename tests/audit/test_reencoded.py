"""``tokenizers.reencoded``: gateway records and samples written by the gateway's own code (stitching,
export); a pipeline that re-encodes the text, one that edits a token and one that shifts the loss mask are
each flagged and named, the gateway's own export passes, and a re-encoding that changes nothing passes."""
from __future__ import annotations

import json

import pytest

from trajkit.audit.reencoded import reencoded_check
from trajkit.audit.tokenizers import audit_tokenizers
from trajkit.cli.main import main
from trajkit.errors import InputError
from trajkit.gateway.export import session_samples, write_samples
from trajkit.gateway.sessions import CallRecord, ChoiceRecord, Session, record_line
from trajkit.models.tokenizer import bpe_tokenizer, save_tokenizer

TOK = bpe_tokenizer()
END = TOK.convert_tokens_to_ids("<|im_end|>")


def enc(text: str) -> list[int]:
    return TOK.encode(text, add_special_tokens=False)


def non_canonical(text: str) -> list[int]:
    """``text`` as ids its tokenizer would not produce: each character encoded alone."""
    return [i for ch in text for i in enc(ch)]


def _session(sid: str, first_reply: list[int]) -> Session:
    """Two chat calls: the second prompt extends the first call's prompt and reply by a tool result."""
    p0 = enc("<|im_start|>user\nwhere is the cat<|im_end|>\n<|im_start|>assistant\n")
    p1 = p0 + first_reply + enc("\n<|im_start|>user\nthe tool says: on the mat<|im_end|>\n<|im_start|>assistant\n")
    reply = enc("the cat sat on the mat") + [END]
    s = Session(sid, "m")
    for prompt, ids in ((p0, first_reply), (p1, reply)):
        s.add(CallRecord(-1, "chat", "m", prompt, [ChoiceRecord(ids, [-0.5] * len(ids), "stop", TOK.decode(ids))],
                         0, {}))
    return s


@pytest.fixture
def gateway(tmp_path):
    """records.jsonl and samples.jsonl as trajkit serve --save-dir writes them: session a sampled a
    non-canonical tokenization of its first reply (re-encoding would change it), session b a canonical one."""
    sessions = [_session("a", non_canonical("look at the mat") + [END]), _session("b", enc("look at the mat") + [END])]
    records = tmp_path / "records.jsonl"
    records.write_text("".join(record_line(s.id, r) for s in sessions for r in s.records))
    samples = [row for s in sessions for row in session_samples(s)]
    write_samples(samples, tmp_path / "samples.jsonl")
    return {"records": str(records), "samples": samples, "dir": tmp_path}


def _write(tmp_path, name, rows) -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def reencode(row: dict) -> dict:
    """The planted pipeline bug: keep the text, tokenize it again, take the prompt's length as the split."""
    ids = enc(TOK.decode(row["prompt_ids"] + row["completion_ids"]))
    n = len(row["prompt_ids"])
    if ids == row["prompt_ids"] + row["completion_ids"]:
        return dict(row)  # the same ids: the pipeline keeps its mask too
    return {**row, "prompt_ids": ids[:n], "completion_ids": ids[n:], "loss_mask": [1] * (len(ids) - n)}


def test_the_gateways_own_samples_pass(gateway):
    check = reencoded_check([str(gateway["dir"] / "samples.jsonl")], gateway["records"], TOK)
    assert (check.id, check.verdict, check.statistic, check.items) == ("tokenizers.reencoded", "PASS", 0.0, [])
    assert check.detail.startswith("0 of 2 samples with gateway provenance")
    write_samples(gateway["samples"], gateway["dir"] / "samples.parquet")  # metadata as JSON text there
    assert reencoded_check([str(gateway["dir"] / "samples.parquet")], gateway["records"], TOK).verdict == "PASS"


def test_reencoded_edited_and_mask_shifted_samples_are_each_named(gateway, tmp_path):
    a, b = gateway["samples"]
    assert reencode(a)["prompt_ids"] == a["prompt_ids"] and reencode(a) != a  # the change is in the completion
    edited = {**b, "completion_ids": b["completion_ids"][:-2] + [b["completion_ids"][-2] + 1, END]}
    shifted = {**b, "loss_mask": [0] + b["loss_mask"][:-1]}
    rows = [reencode(a), edited, shifted, reencode(b), {k: v for k, v in b.items() if k != "metadata"}]
    check = reencoded_check([_write(tmp_path, "trained.jsonl", rows)], gateway["records"], TOK)
    assert check.verdict == "FAIL" and check.statistic == 3 / 4
    assert "1 samples without provenance not checked" in check.detail
    first = next(i for i, (x, y) in enumerate(zip(reencode(a)["completion_ids"], a["completion_ids"])) if x != y)
    whole = len(a["prompt_ids"]) + len(a["completion_ids"])
    assert check.items == [
        f"{tmp_path}/trained.jsonl:1 (session a): ids differ from the generated ones at token "
        f"{len(a['prompt_ids']) + first} of {whole}: re-encoded from text (the ids equal encode(decode(generated ids)))",
        f"{tmp_path}/trained.jsonl:2 (session b): ids differ from the generated ones at token "
        f"{len(b['prompt_ids']) + len(b['completion_ids']) - 2} of {len(b['prompt_ids']) + len(b['completion_ids'])}",
        f"{tmp_path}/trained.jsonl:3 (session b): trained tokens differ from the sampled ones at sampled token 0"]
    # session b's canonical reply survives the round trip: re-encoding changed nothing, nothing to flag


def test_cli_and_unusable_input(gateway, tmp_path, capsys):
    tok = save_tokenizer(TOK, tmp_path / "tok")
    trained = _write(tmp_path, "trained.jsonl", [reencode(gateway["samples"][0])])
    assert main(["audit", "tokenizers", tok, "--records", gateway["records"], "--trained", trained, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in out["checks"]][-1] == "tokenizers.reencoded" and out["verdict"] == "FAIL"
    assert "re-encoded from text" in out["checks"][-1]["items"][0]
    with pytest.raises(InputError, match="--records and --trained go together"):
        audit_tokenizers([tok], records=gateway["records"])
    lost = _write(tmp_path, "lost.jsonl", [{**gateway["samples"][0], "metadata": {"session": "zz", "calls": [[0, 0]]}}])
    assert "are not in the records" in reencoded_check([lost], gateway["records"]).items[0]
    bare = _write(tmp_path, "bare.jsonl", [{"prompt_ids": [1], "completion_ids": [2], "loss_mask": [1]}])
    with pytest.raises(InputError, match="none of the 1 samples names its gateway calls"):
        reencoded_check([bare], gateway["records"])
    torn = tmp_path / "torn.jsonl"
    torn.write_text(open(gateway["records"]).read() + '{"session": "a", "ind')  # a server killed mid-write
    assert reencoded_check([str(gateway["dir"] / "samples.jsonl")], str(torn)).verdict == "PASS"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"session": 1}\n' + open(gateway["records"]).read())
    assert main(["audit", "tokenizers", tok, "--records", str(bad), "--trained", trained]) == 2
    assert "bad.jsonl:1: expected a gateway call record" in capsys.readouterr().err
