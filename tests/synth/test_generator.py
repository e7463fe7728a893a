"""Tests for the synthetic trace generator (trajkit.synth).

The generator's Truth is computed from its structured plan; here every field is re-derived from the rendered
text by an independent reference (``reference_counts``: plain ``str.split`` on the tags and ``json.loads``
on the bodies, written from the contract in issue 2, not from the generator's code) and by simple substring
counts. Quirk presence is detected with string checks only (``quirks_of``).
"""
from __future__ import annotations

import gzip
import json
import lzma
import re
import uuid
from collections import Counter

import pytest

from trajkit.errors import ConfigError
from trajkit.synth import (
    STYLES,
    SynthConfig,
    Truth,
    generate,
    generate_with_truth,
    make_row,
)
from trajkit.synth import generator as synth

ALL_RATES = [f for f in SynthConfig.__dataclass_fields__ if f.endswith("_rate")]
ZERO = {f: 0.0 for f in ALL_RATES if f not in ("empty_think_rate", "narration_rate")}


# ---- independent reference -----------------------------------------------------------------------------
_JSON_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
               "array": (list,), "object": (dict,)}


def _type_ok(kind: str, value) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    return isinstance(value, _JSON_TYPES[kind])


def _violates(schema: dict, args: dict) -> bool:
    """The contract's check: a required property missing or a property of the wrong JSON type."""
    props = schema.get("properties", {})
    if any(k not in args for k in schema.get("required") or []):
        return True
    return any(k in props and not _type_ok(props[k]["type"], v) for k, v in args.items())


def _strict_violations(schema: dict, args: dict) -> list[str]:
    """Stricter than the contract (enums, minimum, maxItems, item types, unknown keys): valid calls must pass."""
    out = ["schema"] if _violates(schema, args) else []
    for key, value in args.items():
        prop = schema["properties"].get(key)
        if prop is None:
            out.append(f"unknown {key}")
            continue
        if "enum" in prop and value not in prop["enum"]:
            out.append(f"enum {key}")
        if "minimum" in prop and isinstance(value, int) and value < prop["minimum"]:
            out.append(f"minimum {key}")
        if prop.get("type") == "array" and isinstance(value, list):
            if len(value) > prop.get("maxItems", 10**9):
                out.append(f"maxItems {key}")
            item = prop.get("items", {})
            for v in value:
                if not _type_ok(item.get("type", "object"), v) or (item.get("type") == "object"
                                                                   and _strict_violations(item, v)):
                    out.append(f"item {key}")
    return out


def _outcome(block: str) -> tuple[bool, bool]:
    """(failed, nonzero exit) for one response block, by the harness rule in issue 2."""
    try:
        obj = json.loads(block)
    except ValueError:
        obj = block
    result = obj["content"] if isinstance(obj, dict) and "content" in obj else obj
    if isinstance(result, str):
        try:
            parsed = json.loads(result)
            result = parsed if isinstance(parsed, dict) else result
        except ValueError:
            pass
    if isinstance(result, dict):
        code = result.get("exit_code")
        nonzero = isinstance(code, int) and not isinstance(code, bool) and code != 0
        return result.get("error") is not None or result.get("success") is False, nonzero
    text = result.strip()
    return text == "" or text.lower().startswith("error:"), False


def _blocks(value: str, tag: str) -> list[str]:
    return [part.split(f"</{tag}>")[0].strip() for part in value.split(f"<{tag}>")[1:]]


def _call(body: str):
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    ok = isinstance(obj, dict) and isinstance(obj.get("name"), str) and isinstance(obj.get("arguments"), dict)
    return obj if ok else None


def _schemas(row: dict) -> dict[str, dict]:
    return {t.get("function", t)["name"]: t.get("function", t)["parameters"] for t in json.loads(row["tools"])}


def reference_counts(row: dict) -> dict:
    """Every Truth field, re-derived from the row's text."""
    schemas, conv = _schemas(row), row["conversations"]
    c: Counter = Counter(messages=len(conv))
    names: Counter = Counter()
    prev, turn, failed, succeeded = None, -1, [], []
    for i, m in enumerate(conv):
        if m["from"] == "tool":
            blocks = _blocks(m["value"], "tool_response")
            c["tool_responses"] += len(blocks)
            for b in blocks:
                f, nz = _outcome(b)
                c["failed_tool_responses"] += f
                c["nonzero_exit_responses"] += nz
            if conv[i - 1]["from"] != "gpt":
                c["orphan_tool_responses"] += len(blocks)
        if m["from"] != "gpt":
            continue
        turn += 1
        c["assistant_turns"] += 1
        c["think_words"] += len(m["value"].split("<think>", 1)[1].split("</think>", 1)[0].split())
        keys = []
        for body in _blocks(m["value"], "tool_call"):
            c["tool_calls"] += 1
            obj = _call(body)
            if obj is None:
                c["malformed_tool_calls"] += 1
                keys.append(None)
                continue
            names[obj["name"]] += 1
            if obj["name"] not in schemas:
                c["unknown_tool_calls"] += 1
            elif _violates(schemas[obj["name"]], obj["arguments"]):
                c["invalid_argument_calls"] += 1
            key = (obj["name"], json.dumps(obj["arguments"], sort_keys=True))
            c["retry_loops"] += key == prev
            prev = key
            keys.append(key)
        c["parallel_turns"] += len(keys) >= 2
        nxt = conv[i + 1] if i + 1 < len(conv) else {"from": "end", "value": ""}
        resps = _blocks(nxt["value"], "tool_response") if nxt["from"] == "tool" else []
        c["unanswered_tool_calls"] += max(0, len(keys) - len(resps))
        c["orphan_tool_responses"] += max(0, len(resps) - len(keys))
        for key, block in zip(keys, resps):
            if _outcome(block)[0]:
                failed.append((turn, key))
            elif key is not None:
                succeeded.append((turn, key))
    c["recoveries"] = sum(any(t2 > t1 and k2 != k1 for t2, k2 in succeeded) for t1, k1 in failed)
    out = {f: c.get(f, 0) for f in synth._TRUTH_INTS}
    out["tool_call_counts"] = dict(sorted(names.items()))
    return out


_TRUNC = re.compile(r"\[OUTPUT TRUNCATED - \d+ chars omitted out of \d+ total\]")
_NONZERO_OK = re.compile(r'"exit_code": (-?[1-9]\d*), "error": null')


def quirks_of(row: dict) -> set[str]:
    """Which quirks a row shows, by string checks on its text."""
    conv, found = row["conversations"], set()
    tool_names = set(_schemas(row))
    bodies = []
    for i, m in enumerate(conv):
        v, nxt = m["value"], conv[i + 1] if i + 1 < len(conv) else None
        if m["from"] == "gpt":
            n = v.count("<tool_call>")
            found |= {"parallel"} if n >= 2 else set()
            found |= {"empty_think"} if "<think>\n\n</think>" in v else set()
            found |= {"malformed:python_dict"} if "<tool_call>\n{'name'" in v else set()
            found |= {"malformed:unclosed"} if v.rfind("<tool_call>") > v.rfind("</tool_call>") else set()
            found |= {"consecutive_gpt"} if n and nxt and nxt["from"] == "gpt" else set()
            if n and nxt and nxt["from"] == "tool" and nxt["value"].count("<tool_response>") != n:
                found.add("response_mismatch")
            for part in v.split("<tool_call>")[1:]:
                if "</tool_call>" not in part:
                    continue
                body = part.split("</tool_call>")[0].strip()
                try:
                    obj = json.loads(body)
                except ValueError:
                    found |= set() if body.startswith("{'") else {"malformed:truncated"}
                    continue
                if "arguments" not in obj:
                    found.add("malformed:missing_arguments")
                elif isinstance(obj["arguments"], str):
                    found.add("malformed:string_arguments")
                else:
                    found |= {"unknown_tool"} if obj["name"] not in tool_names else set()
                    bodies.append(body)
        elif m["from"] == "human" and v.startswith("[CONTEXT SUMMARY]:"):
            found.add("context_summary")
        elif m["from"] == "tool":
            found |= {"orphan_message"} if conv[i - 1]["from"] != "gpt" else set()
            found |= {"truncated_output"} if _TRUNC.search(v) else set()
            if "<script>alert(" in v and "onerror=" in v and "</textarea>" in v:
                found.add("html_payload")
            found |= {"nonzero_exit_not_failed"} if _NONZERO_OK.search(v) else set()
            found |= {"nested_error_not_failed"} if '"error": "HTTP 403 Forbidden"}]}' in v else set()
            found |= {"json_string_content"} if '"content": "{' in v else set()
            found |= {"error_string_content"} if re.search(r'"content": "\s*error:', v, re.I) else set()
            found |= {"empty_string_content"} if '"content": ""}' in v else set()
            found |= {"raw_response"} if any(not b.startswith("{") for b in _blocks(v, "tool_response")) else set()
            found |= {"failed_response"} if any(_outcome(b)[0] for b in _blocks(v, "tool_response")) else set()
    found |= {"retry"} if any(a == b for a, b in zip(bodies, bodies[1:])) else set()
    found |= {"upstream_tools"} if '"required": null' in row["tools"] else set()
    return found


QUIRKS = ("parallel", "empty_think", "malformed:python_dict", "malformed:unclosed", "malformed:truncated",
          "malformed:missing_arguments", "malformed:string_arguments", "consecutive_gpt", "response_mismatch",
          "unknown_tool", "context_summary", "orphan_message", "truncated_output", "html_payload",
          "nonzero_exit_not_failed", "nested_error_not_failed", "json_string_content", "error_string_content",
          "empty_string_content", "raw_response", "failed_response", "retry", "upstream_tools")


@pytest.fixture(scope="module")
def sample():
    """The bundled sample, read from the packaged file, with the regenerated truth beside each row."""
    rows = []
    for path in synth.sample_paths():
        with lzma.open(path, "rt", encoding="utf-8") as f:
            rows += [json.loads(line) for line in f]
    return rows, list(synth.sample_with_truth())


# ---- config -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, needle", [
    ({"style": "gpt"}, "style"), ({"rows": -1}, "rows"), ({"retry_rate": 1.5}, "retry_rate"),
    ({"malformed_kinds": ("bogus",)}, "malformed_kinds"), ({"min_tool_turns": 5, "max_tool_turns": 2}, "min_tool"),
    ({"think_words_mean": -3}, "think_words_mean")])
def test_config_rejects_bad_values_naming_the_parameter(kwargs, needle):
    with pytest.raises(ConfigError, match=needle):
        SynthConfig(**kwargs)


def test_style_defaults_fill_unset_fields_only():
    assert SynthConfig(style="kimi").malformed_rate == 0.13
    assert SynthConfig(style="glm-5.1").think_words_mean == 70.0
    assert SynthConfig(style="kimi", think_words_mean=10).think_words_mean == 10


# ---- determinism --------------------------------------------------------------------------------------
def test_same_seed_same_rows_and_other_seed_other_rows():
    a = list(generate(SynthConfig(rows=6, seed=3)))
    assert a == list(generate(SynthConfig(rows=6, seed=3)))
    b = list(generate(SynthConfig(rows=6, seed=4)))
    assert not {r["id"] for r in a} & {r["id"] for r in b}


def test_row_i_depends_only_on_seed_and_index():
    full = list(generate(SynthConfig(rows=12, seed=9, style="glm-5.1")))
    part = list(generate(SynthConfig(rows=4, start=7, seed=9, style="glm-5.1")))
    assert part == full[7:11]
    assert make_row(SynthConfig(rows=1, seed=9, style="glm-5.1"), 11)[0] == full[11]


# ---- format -------------------------------------------------------------------------------------------
def test_rows_have_the_dataset_format(sample):
    rows, _ = sample
    assert len(rows) == 200
    for row in rows:
        assert list(row) == ["id", "conversations", "tools", "category", "subcategory", "task"]
        assert uuid.UUID(row["id"]).version == 4 and str(uuid.UUID(row["id"])) == row["id"]
        conv = row["conversations"]
        assert [m["from"] for m in conv[:2]] == ["system", "human"] and conv[-1]["from"] == "gpt"
        assert {m["from"] for m in conv} <= {"system", "human", "gpt", "tool"}
        assert all(set(m) == {"from", "value"} and isinstance(m["value"], str) for m in conv)
        assert "<tool_call>" not in conv[-1]["value"]
        tools = json.loads(row["tools"])
        assert 14 <= len(tools) <= 16
        prompt = conv[0]["value"]
        assert "<tools>\n" + row["tools"] + "\n</tools>" in prompt
        assert 20_000 <= len(prompt) <= 30_000
        assert row["category"] in synth.text.TASKS and row["subcategory"] in synth.text.TASKS[row["category"]]
        assert conv[1]["value"].startswith(row["task"])


def test_shape_matches_the_real_row(real_row):
    conv = real_row["conversations_preview"]
    prompt = conv[0]["value"]
    start, end = prompt.index("<tools>\n") + len("<tools>\n"), prompt.rindex("\n</tools>")
    row, _ = make_row(SynthConfig(rows=1, upstream_tools_rate=0.0), 0)
    ours = row["conversations"][0]["value"]
    assert ours.startswith(prompt[:start]) and ours.endswith(prompt[end:])
    real_tools = json.loads(prompt[start:end])
    assert json.dumps(real_tools, ensure_ascii=False) == prompt[start:end]  # the convention tools_json follows
    assert [set(t) for t in real_tools][0] == set(json.loads(row["tools"])[0]) == {"type", "function"}
    call = _blocks(conv[2]["value"], "tool_call")[0]
    assert json.dumps(json.loads(call), ensure_ascii=False) == call  # so do call and response bodies
    resp = _blocks(conv[3]["value"], "tool_response")[0]
    assert list(json.loads(resp)) == ["tool_call_id", "name", "content"]
    assert conv[2]["value"].startswith("<think>\n ") and row["conversations"][2]["value"].startswith("<think>\n ")


# ---- truth --------------------------------------------------------------------------------------------
def _assert_truth_matches_text(pairs):
    for row, truth in pairs:
        assert truth.as_dict() == reference_counts(row), row["id"]
        gpt = [m["value"] for m in row["conversations"] if m["from"] == "gpt"]
        tool = [m["value"] for m in row["conversations"] if m["from"] == "tool"]
        assert sum(v.count("<tool_call>") for v in gpt) == truth.tool_calls
        assert sum(v.count("<tool_response>") for v in tool) == truth.tool_responses
        assert len(gpt) == truth.assistant_turns and len(row["conversations"]) == truth.messages


def test_truth_matches_text_on_the_sample(sample):
    rows, pairs = sample
    assert rows == [row for row, _ in pairs]  # the packaged file is what the generator makes today
    _assert_truth_matches_text(pairs)


@pytest.mark.parametrize("style", STYLES)
def test_truth_matches_text_with_every_quirk_forced(style):
    forced = {f: 1.0 for f in ALL_RATES if f not in ("empty_think_rate", "narration_rate")}
    _assert_truth_matches_text(generate_with_truth(SynthConfig(rows=40, style=style, seed=5, **forced)))


def test_valid_calls_satisfy_the_full_schema_and_invalid_ones_break_it_once():
    """Every well-formed call to a known tool not counted invalid passes enums, minimums and item types too."""
    strict_bad, invalid = 0, 0
    for row, truth in generate_with_truth(SynthConfig(rows=150, seed=2, invalid_args_rate=0.5)):
        schemas = _schemas(row)
        for m in row["conversations"]:
            for body in _blocks(m["value"], "tool_call") if m["from"] == "gpt" else []:
                obj = _call(body)
                if obj and obj["name"] in schemas:
                    strict_bad += bool(_strict_violations(schemas[obj["name"]], obj["arguments"]))
        invalid += truth.invalid_argument_calls
    assert invalid > 20 and strict_bad == invalid


def test_truth_sums():
    (_, a), (_, b) = list(generate_with_truth(SynthConfig(rows=2, seed=1)))
    total = a + b
    assert total.tool_calls == a.tool_calls + b.tool_calls
    merged = Counter(a.tool_call_counts) + Counter(b.tool_call_counts)
    assert total.tool_call_counts == dict(merged)


# ---- quirks -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("style", STYLES)
def test_every_quirk_appears_in_the_sample_for_each_style(sample, style):
    rows, _ = sample
    part = rows[:100] if style == "kimi" else rows[100:]
    counts = Counter(q for row in part for q in quirks_of(row))
    missing = [q for q in QUIRKS if counts[q] == 0]
    assert not missing, f"{style}: {missing}"


@pytest.mark.parametrize("rate, quirk", [
    ("parallel_rate", "parallel"), ("consecutive_gpt_rate", "consecutive_gpt"),
    ("response_mismatch_rate", "response_mismatch"), ("context_summary_rate", "context_summary"),
    ("orphan_message_rate", "orphan_message"), ("truncation_rate", "truncated_output"),
    ("html_payload_rate", "html_payload"), ("unknown_tool_rate", "unknown_tool"),
    ("nonzero_exit_rate", "nonzero_exit_not_failed"), ("failure_rate", "failed_response"),
    ("retry_rate", "retry"), ("upstream_tools_rate", "upstream_tools")])
def test_a_rate_of_one_forces_the_quirk_and_zero_removes_it(rate, quirk):
    on = [quirks_of(r) for r in generate(SynthConfig(rows=15, seed=8, **{**ZERO, rate: 1.0}))]
    off = [quirks_of(r) for r in generate(SynthConfig(rows=15, seed=8, **ZERO))]
    assert all(quirk in q for q in on) and not any(quirk in q for q in off)


@pytest.mark.parametrize("kind", synth.MALFORMED_KINDS)
def test_each_malformed_kind_can_be_forced(kind):
    pairs = list(generate_with_truth(SynthConfig(rows=10, seed=4, malformed_rate=1.0, malformed_kinds=(kind,))))
    assert all(f"malformed:{kind}" in quirks_of(row) and truth.malformed_tool_calls >= 1 for row, truth in pairs)


def test_clean_config_has_no_quirk_counts():
    total = Truth()
    for _, truth in generate_with_truth(SynthConfig(rows=60, seed=6, **ZERO)):
        total += truth
    assert total.tool_calls > 100
    assert all(getattr(total, f) == 0 for f in (
        "malformed_tool_calls", "parallel_turns", "failed_tool_responses", "nonzero_exit_responses",
        "unknown_tool_calls", "unanswered_tool_calls", "orphan_tool_responses", "invalid_argument_calls",
        "recoveries", "retry_loops"))


def test_malformed_row_rate_is_the_configured_fraction():
    """Rows with >= 1 malformed call are a Bernoulli(rate) draw per row: 2000 rows, 4.5 sigma band."""
    n = 2000
    rate = sum(t.malformed_tool_calls > 0 for _, t in generate_with_truth(SynthConfig(rows=n, seed=12))) / n
    assert abs(rate - 0.13) < 4.5 * (0.13 * 0.87 / n) ** 0.5


@pytest.mark.parametrize("style, target", [("kimi", 414.0), ("glm-5.1", 70.0)])
def test_think_words_per_row_near_target(style, target):
    pairs = list(generate_with_truth(SynthConfig(rows=1200, seed=21, style=style)))
    mean = sum(t.think_words for _, t in pairs) / len(pairs)
    assert abs(mean / target - 1) < 0.06
    thinks = [m["value"].split("</think>")[0] for row, _ in pairs for m in row["conversations"]
              if m["from"] == "gpt" and not m["value"].startswith("<think>\n\n</think>")]
    lead_space = sum(t.startswith("<think>\n ") for t in thinks)
    assert lead_space == (len(thinks) if style == "kimi" else 0)


# ---- output -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["c.jsonl", "c.jsonl.gz", "c.jsonl.xz", "c.parquet"])
def test_write_corpus_round_trips(tmp_path, name):
    config = SynthConfig(rows=7, seed=13, style="glm-5.1")
    truth = synth.write_corpus(tmp_path / name, config, progress=False)
    path = tmp_path / name
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq
        back = pq.read_table(path).to_pylist()
    else:
        opener = {".gz": gzip.open, ".xz": lzma.open}.get(name[-3:], open)
        with opener(path, "rt", encoding="utf-8") as f:
            back = [json.loads(line) for line in f]
    assert back == list(generate(config))
    expected = Truth()
    for _, t in generate_with_truth(config):
        expected += t
    assert truth == expected


def test_write_corpus_rejects_unknown_suffix(tmp_path):
    with pytest.raises(ConfigError, match=r"\.jsonl\.gz"):
        synth.write_corpus(tmp_path / "c.csv", SynthConfig(rows=1), progress=False)


def test_build_sample_is_reproducible(tmp_path):
    outs = synth.build_sample(tmp_path)
    assert [p.name for p in outs] == ["kimi.jsonl.xz", "glm-5.1.jsonl.xz"]
    assert [p.read_bytes() for p in outs] == [p.read_bytes() for p in synth.sample_paths()]
