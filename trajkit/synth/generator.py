"""Seeded generator of realistic synthetic agent traces in the ``lambda/hermes-agent-reasoning-traces`` format.

Each row is ``{"id", "conversations": [{"from": "system"|"human"|"gpt"|"tool", "value"}], "tools", "category",
"subcategory", "task"}``, in either model's style (``kimi``: long think text starting with a space;
``glm-5.1``: short or empty think text, more narration). It is used as the bundled sample (``sample_paths()``)
and to make full-scale corpora for benchmarks (``write_corpus``).

Algorithm, per row ``i``: a ``random.Random`` is seeded from ``(style, seed, i)`` only, so any slice can be
regenerated alone. The row draws a scene (category, task, vocabulary), a toolset and its form (OpenAI or
upstream Hermes), then a *plan*: which quirks the row carries (each with its own per-row rate) and on which
tool-using assistant turn each lands. The plan is filled with structured turns (think text, calls, responses
whose failure flags are declared by the builder), rendered to text, and the :class:`Truth` counts are
computed from the structured turns — never by parsing the rendered text. Tests check the two agree with
independent string checks.

Deviations from the real data: the prose is template text (realistic in shape and length, not in content);
quirk rates are estimates except ``malformed_rate`` (13% of kimi rows, from the dataset card) and the think
word means (414 kimi, 70 glm-5.1). JSONL output is written compact (``orjson``); the strings inside (tool
lists, call and response bodies) use ``json.dumps`` default separators like the real rows.
"""
from __future__ import annotations

import dataclasses
import importlib.resources
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal

from trajkit.errors import ConfigError
from trajkit.synth import text
from trajkit.synth.build import ToolMsg, Turn, fill_row, plan_turns, render_row
from trajkit.synth.tools import system_prompt, tools_json, toolset

Style = Literal["kimi", "glm-5.1"]
STYLES: tuple[str, ...] = ("kimi", "glm-5.1")
MALFORMED_KINDS: tuple[str, ...] = ("python_dict", "truncated", "unclosed", "missing_arguments", "string_arguments")
# Defaults that depend on the style; a config field left at None takes its value from here.
STYLE_DEFAULTS: dict[str, dict[str, float]] = {
    "kimi": {"malformed_rate": 0.13, "think_words_mean": 414.0, "empty_think_rate": 0.03, "narration_rate": 0.2},
    "glm-5.1": {"malformed_rate": 0.06, "think_words_mean": 70.0, "empty_think_rate": 0.3, "narration_rate": 0.55},
}


@dataclass
class SynthConfig:
    """What to generate. Each quirk's ``*_rate`` is the fraction of rows that carry it at least once (1.0
    forces it into every row, 0.0 removes it); ``empty_think_rate`` and ``narration_rate`` are per turn.
    Fields left at None take the style's default from ``STYLE_DEFAULTS``. Example::

        >>> SynthConfig(rows=10, style="glm-5.1", retry_rate=1.0).think_words_mean
        70.0
    """

    rows: int = 100
    style: Style = "kimi"
    seed: int = 0
    start: int = 0
    malformed_rate: float | None = None
    malformed_kinds: tuple[str, ...] = MALFORMED_KINDS
    think_words_mean: float | None = None
    empty_think_rate: float | None = None
    narration_rate: float | None = None
    parallel_rate: float = 0.35
    failure_rate: float = 0.45
    nonzero_exit_rate: float = 0.25
    retry_rate: float = 0.1
    unknown_tool_rate: float = 0.07
    invalid_args_rate: float = 0.1
    consecutive_gpt_rate: float = 0.07
    response_mismatch_rate: float = 0.07
    context_summary_rate: float = 0.08
    orphan_message_rate: float = 0.05
    truncation_rate: float = 0.2
    html_payload_rate: float = 0.1
    string_content_rate: float = 0.15
    raw_response_rate: float = 0.06
    upstream_tools_rate: float = 0.12
    min_tool_turns: int = 1
    max_tool_turns: int = 16

    __field_docs__ = {
        "rows": "number of rows to generate", "style": "model style: think length, narration, quirk rates",
        "seed": "corpus seed; row i depends only on (style, seed, i)", "start": "index of the first row",
        "malformed_rate": "rows with >= 1 malformed tool call (default kimi 0.13, glm-5.1 0.06)",
        "think_words_mean": "mean think words per row (default kimi 414, glm-5.1 70)",
        "empty_think_rate": "per assistant turn: empty think block (default kimi 0.03, glm-5.1 0.3)",
        "narration_rate": "per tool-calling turn: narration after the think block (kimi 0.2, glm-5.1 0.55)",
        "parallel_rate": "rows where 1-2 turns make 2-4 calls at once (a dropped response also needs 2)",
        "failure_rate": "rows with 1-2 injected failed tool results (other quirks fail calls too)",
        "nonzero_exit_rate": "rows with 1-2 terminal results with exit_code != 0 and error null",
        "retry_rate": "rows where a failed call is repeated identically 1-2 times",
        "unknown_tool_rate": "rows with 1-2 calls to a tool absent from the row's tools",
        "invalid_args_rate": "rows with 1-2 calls whose arguments break the tool's schema once",
        "consecutive_gpt_rate": "rows where a calling turn gets no tool message (its calls go unanswered)",
        "response_mismatch_rate": "rows where a tool message drops its last response or repeats it",
        "context_summary_rate": "rows with a [CONTEXT SUMMARY]: human turn from trajectory compression",
        "orphan_message_rate": "rows with a stray tool message right after a context summary",
        "truncation_rate": "rows with 1-2 outputs cut by [OUTPUT TRUNCATED - N chars omitted out of M total]",
        "html_payload_rate": "rows with 1-2 browsing results holding raw HTML with script payloads",
        "string_content_rate": "rows with 1-2 results whose content is a string (JSON text, plain, Error:, empty)",
        "raw_response_rate": "rows with 1-2 response blocks that are not JSON at all",
        "upstream_tools_rate": "rows whose tools use the upstream Hermes form {name, description, parameters, "
                               "required: null}",
        "min_tool_turns": "fewest tool-calling assistant turns per row",
        "max_tool_turns": "most tool-calling assistant turns per row (forced quirks may add a few)",
    }

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ConfigError(f"style={self.style!r} is not one of {STYLES}; set style to one of them")
        for name, value in STYLE_DEFAULTS[self.style].items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        for name in ("rows", "start", "min_tool_turns", "max_tool_turns"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ConfigError(f"{name}={getattr(self, name)!r} must be an integer >= 0")
        if not 1 <= self.min_tool_turns <= self.max_tool_turns:
            raise ConfigError(f"min_tool_turns={self.min_tool_turns} and max_tool_turns={self.max_tool_turns} must "
                              "satisfy 1 <= min_tool_turns <= max_tool_turns")
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name.endswith("_rate") and not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
                raise ConfigError(f"{f.name}={value!r} must be a number in [0, 1]")
        if not isinstance(self.think_words_mean, (int, float)) or self.think_words_mean < 0:
            raise ConfigError(f"think_words_mean={self.think_words_mean!r} must be a number >= 0")
        self.malformed_kinds = tuple(self.malformed_kinds)
        bad = [k for k in self.malformed_kinds if k not in MALFORMED_KINDS]
        if bad or not self.malformed_kinds:
            raise ConfigError(f"malformed_kinds={self.malformed_kinds!r}: set a non-empty subset of {MALFORMED_KINDS}")


@dataclass
class Truth:
    """Counts for one row (or, summed with ``+``, a corpus), known by construction.

    Definitions (the contract of ``trajkit traces stats``; "call block" = a ``<tool_call>`` in a gpt message,
    "response block" = a ``<tool_response>`` in a tool message):

    - ``messages``: entries of ``conversations``, the system message included.
    - ``assistant_turns``: gpt messages.
    - ``tool_calls``: call blocks, malformed ones included, and one left unclosed at the end of a message.
    - ``malformed_tool_calls``: call blocks whose body is not a strict JSON object with a string ``name`` and an
      object ``arguments`` (Python-dict quoting, truncated JSON, an unclosed block — its body is always
      truncated too —, ``arguments`` missing, ``arguments`` given as a string).
    - ``parallel_turns``: gpt messages with >= 2 call blocks.
    - ``tool_responses``: response blocks.
    - ``failed_tool_responses``: response blocks that failed under the harness rule, applied to the block's
      ``content`` when the block is a JSON object with that key, otherwise to the block text itself. The
      result is ``content`` if it is an object, ``json.loads(content)`` if it is a string holding a JSON object,
      else the string. Failed: an object with a non-null ``error`` or ``success`` == false; a non-JSON string
      that is empty or starts with ``error:`` (case-insensitive, after stripping whitespace).
    - ``nonzero_exit_responses``: response blocks whose result (as above) is an object with an integer
      ``exit_code`` != 0 (with or without an error; ``error: null`` with exit 1 is not a failure).
    - ``think_words``: ``len(think_text.split())`` summed over the ``<think>`` blocks of gpt messages.
    - ``tool_call_counts``: {name: count} over well-formed calls (unknown tools included).
    - ``unknown_tool_calls``: well-formed calls whose name is absent from the row's ``tools``.
    - ``invalid_argument_calls``: well-formed calls to a known tool whose arguments violate its JSON schema
      (``parameters``): a required property missing, or a property of the wrong JSON type.
    - ``unanswered_tool_calls`` / ``orphan_tool_responses``: for each gpt message, its call blocks minus the
      response blocks of the tool message right after it (0 if none), positive part each way; response blocks
      of a tool message not right after a gpt message are all orphans.
    - ``recoveries``: failed response blocks paired (by position, block k with call k of the gpt message right
      before) with a call, such that a *later* gpt message holds a well-formed call answered by a non-failed
      paired response whose (name, arguments) differ from the failed call's (a malformed failed call differs
      from every call). Each failed response counts at most once; orphan responses never count.
    - ``retry_loops``: well-formed calls identical in name and arguments to the immediately previous
      well-formed call (trace order, across messages).
    """

    messages: int = 0
    assistant_turns: int = 0
    tool_calls: int = 0
    malformed_tool_calls: int = 0
    parallel_turns: int = 0
    tool_responses: int = 0
    failed_tool_responses: int = 0
    nonzero_exit_responses: int = 0
    think_words: int = 0
    tool_call_counts: dict[str, int] = field(default_factory=dict)
    unknown_tool_calls: int = 0
    unanswered_tool_calls: int = 0
    orphan_tool_responses: int = 0
    invalid_argument_calls: int = 0
    recoveries: int = 0
    retry_loops: int = 0

    def __iadd__(self, other: "Truth") -> "Truth":
        for name in _TRUTH_INTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        counts = self.tool_call_counts
        for name, n in other.tool_call_counts.items():
            counts[name] = counts.get(name, 0) + n
        self.tool_call_counts = dict(sorted(counts.items()))
        return self

    def __add__(self, other: "Truth") -> "Truth":
        out = Truth(tool_call_counts=dict(self.tool_call_counts))
        for name in _TRUTH_INTS:
            setattr(out, name, getattr(self, name))
        out += other
        return out

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_TRUTH_INTS = tuple(f.name for f in dataclasses.fields(Truth) if f.name != "tool_call_counts")


def truth_of(items: list, tool_names: set[str]) -> Truth:
    """Truth of a structured row (the items after the first human message), read off the plan objects."""
    t = Truth(messages=2 + len(items))
    counts: Counter[str] = Counter()
    prev_key, turn_no = None, -1
    failed: list[tuple[int, tuple | None]] = []  # (gpt turn, key of the failed call)
    succeeded: list[tuple[int, tuple]] = []  # (gpt turn, key of a well-formed call answered successfully)
    for idx, item in enumerate(items):
        before = items[idx - 1] if idx else None
        after = items[idx + 1] if idx + 1 < len(items) else None
        if isinstance(item, ToolMsg):
            t.tool_responses += len(item.responses)
            t.failed_tool_responses += sum(r.failed for r in item.responses)
            t.nonzero_exit_responses += sum(r.nonzero for r in item.responses)
            if not isinstance(before, Turn):
                t.orphan_tool_responses += len(item.responses)
        if not isinstance(item, Turn):
            continue
        turn_no += 1
        calls = item.calls
        t.assistant_turns += 1
        t.tool_calls += len(calls)
        t.parallel_turns += len(calls) >= 2
        t.think_words += len(item.think.split())
        for call in calls:
            if call.malformed:
                t.malformed_tool_calls += 1
                continue
            counts[call.name] += 1
            t.unknown_tool_calls += call.name not in tool_names
            t.invalid_argument_calls += call.name in tool_names and call.invalid
            t.retry_loops += call.key() == prev_key
            prev_key = call.key()
        resps = after.responses if isinstance(after, ToolMsg) else []
        t.unanswered_tool_calls += max(0, len(calls) - len(resps))
        t.orphan_tool_responses += max(0, len(resps) - len(calls))
        for call, resp in zip(calls, resps):
            if resp.failed:
                failed.append((turn_no, call.key()))
            elif call.key() is not None:
                succeeded.append((turn_no, call.key()))
    t.recoveries = sum(any(later > turn and key != fkey for later, key in succeeded) for turn, fkey in failed)
    t.tool_call_counts = dict(sorted(counts.items()))
    return t


def _rng(config: SynthConfig, index: int) -> random.Random:
    return random.Random(f"trajkit.synth/{config.style}/{config.seed}/{index}")


def _make(config: SynthConfig, index: int) -> tuple[dict, list, set[str]]:
    rng = _rng(config, index)
    row_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    scene = text.make_scene(rng)
    names = toolset(scene.category)
    scene.tools = names
    form = "upstream" if rng.random() < config.upstream_tools_rate else "openai"
    items = fill_row(rng, config, scene, plan_turns(rng, config))
    return render_row(row_id, scene, system_prompt(names, form), tools_json(names, form), items), items, set(names)


def make_row(config: SynthConfig, index: int) -> tuple[dict, Truth]:
    """Row ``index`` of the corpus described by ``config`` and its truth; depends only on (style, seed, index)
    and the rates, not on ``rows`` or ``start``."""
    row, items, names = _make(config, index)
    return row, truth_of(items, names)


def generate_with_truth(config: SynthConfig) -> Iterator[tuple[dict, Truth]]:
    """Rows ``start .. start+rows-1`` with their truth, one at a time (constant memory)."""
    for index in range(config.start, config.start + config.rows):
        yield make_row(config, index)


def generate(config: SynthConfig) -> Iterator[dict]:
    """Rows ``start .. start+rows-1``, one at a time; deterministic for a config."""
    for index in range(config.start, config.start + config.rows):
        yield _make(config, index)[0]


# ---- output ----------------------------------------------------------------------------------------------
# The bundled sample. Each seed is the first from 20260501 up whose 100 rows show every quirk the tests
# look for (glm-5.1 has ~7 malformed calls per 100 rows over 5 kinds, so a kind can be absent by chance);
# after a change to the generator, rerun that search if test_every_quirk_appears_in_the_sample fails.
SAMPLE_CONFIGS = (SynthConfig(rows=100, style="kimi", seed=20260501),
                  SynthConfig(rows=100, style="glm-5.1", seed=20260501))
_PARQUET_BATCH = 256


def _row_schema():
    """Parquet column types of a dataset row (conversations as a list of {from, value} structs)."""
    import pyarrow as pa

    turn = pa.struct([("from", pa.string()), ("value", pa.string())])
    return pa.schema([("id", pa.string()), ("conversations", pa.list_(turn)), ("tools", pa.string()),
                      ("category", pa.string()), ("subcategory", pa.string()), ("task", pa.string())])


def _write(path: Path, pairs: Iterable[tuple[dict, Truth]], total: int, progress: bool, level: int | None) -> Truth:
    from trajkit.progress import progress_bar
    from trajkit.traces.write import RowWriter, output_format

    truth = Truth()
    schema = _row_schema() if output_format(path) == ".parquet" else None
    with RowWriter(path, schema=schema, level=level) as writer, \
            progress_bar(total=total, desc=f"synth {path.name}", unit="row", enabled=progress) as bar:
        for row, row_truth in pairs:
            truth += row_truth
            writer.write(row)
            bar.update(1)
    return truth


def write_corpus(path: str | Path, config: SynthConfig, *, progress: bool = True, level: int | None = None) -> Truth:
    """Write ``config``'s rows to ``path`` (*.jsonl, *.jsonl.gz, *.jsonl.xz or *.parquet, by suffix)
    streaming, with a progress bar; return the corpus :class:`Truth` (the sum over rows)."""
    return _write(Path(path), generate_with_truth(config), config.rows, progress, level)


def sample_with_truth() -> Iterator[tuple[dict, Truth]]:
    """The bundled sample's rows with their truth, regenerated: 100 kimi rows, then 100 glm-5.1 rows."""
    for config in SAMPLE_CONFIGS:
        yield from generate_with_truth(config)


def sample_paths() -> list[Path]:
    """The bundled sample, one file per style (``trajkit/data/sample/{kimi,glm-5.1}.jsonl.xz``), in the
    order of ``SAMPLE_CONFIGS``; the file names make the source labels ``kimi`` and ``glm-5.1``."""
    folder = Path(str(importlib.resources.files("trajkit").joinpath("data", "sample")))
    return [folder / f"{config.style}.jsonl.xz" for config in SAMPLE_CONFIGS]


def build_sample(folder: str | Path | None = None, *, progress: bool = False) -> list[Path]:
    """(Re)write the bundled sample from ``SAMPLE_CONFIGS`` into ``folder`` (default: the packaged one)."""
    outs = sample_paths() if folder is None else [Path(folder) / p.name for p in sample_paths()]
    for config, out in zip(SAMPLE_CONFIGS, outs):
        _write(out, generate_with_truth(config), config.rows, progress, level=9)
    return outs


__all__ = ["SynthConfig", "Truth", "STYLES", "MALFORMED_KINDS", "STYLE_DEFAULTS", "SAMPLE_CONFIGS", "generate",
           "generate_with_truth", "make_row", "truth_of", "write_corpus", "build_sample", "sample_paths",
           "sample_with_truth"]
