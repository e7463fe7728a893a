"""Write token-id SFT examples (format (b)) to Parquet or JSONL, with a progress bar and a summary.

Each conversation goes through :func:`trajkit.traces.export.tokenize.tokenize_conversation` (prefix rendering,
think policy, windowing, mask check on every example); the examples stream to disk in batches, so memory
stays bounded whatever the corpus size. A conversation that raises :class:`InputError` is skipped and
counted, never silently lost; ``strict=True`` raises instead, naming its index.

Row layout (same keys in both formats)::

    {"input_ids": [...], "labels": [...], "conversation": 12, "window_index": 0, "num_windows": 2,
     "turns": [2, 4], "trainable_tokens": 311, "num_tokens": 2048}
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from trajkit.errors import ConfigError, InputError
from trajkit.traces.export.tokenize import Diagnostic, TokenExample, TokenizeConfig, tokenize_batch

BATCH = 16  # conversations rendered and encoded together
from trajkit.traces.write import RowWriter


@dataclass
class ExportSummary:
    """Counts of one token export. ``trained_turns + dropped_turns`` is every assistant turn of the
    conversations read (skipped conversations aside)."""

    out_path: str = ""
    conversations: int = 0
    skipped_conversations: int = 0
    examples: int = 0
    tokens: int = 0
    trainable_tokens: int = 0
    trained_turns: int = 0
    dropped_turns: int = 0
    windowed_conversations: int = 0  # conversations that gave more than one example
    inference_view_examples: int = 0  # prompt and turn encoded apart (the joint encoding merged across them)
    empty_conversations: int = 0  # no trainable assistant turn
    dropped_by_kind: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # the first reasons, "conversation K: why"
    dropped: list[str] = field(default_factory=list)  # the first dropped turns, "conversation K: why"
    # source check (conversations rendered from traces): what the source holds vs what is trained
    source_assistant_turns: int = 0
    source_tool_calls: int = 0
    source_think_words: int = 0
    trained_tool_calls: int = 0
    trained_think_words: int = 0
    template: dict[str, Any] = field(default_factory=dict)  # the probe's findings and the rendering used

    MAX_REASONS: ClassVar[int] = 20

    def add(self, examples: list[TokenExample], diagnostics: list[Diagnostic], index: int = 0,
            sources: dict | None = None) -> None:
        self.conversations += 1
        self.examples += len(examples)
        self.windowed_conversations += len(examples) > 1
        for ex in examples:
            self.tokens += ex.metadata.num_tokens
            self.trainable_tokens += ex.metadata.trainable_tokens
            self.trained_turns += len(ex.metadata.turns)
            self.trained_tool_calls += ex.metadata.tool_calls
            self.trained_think_words += ex.metadata.think_words
            self.inference_view_examples += ex.metadata.inference_view
        self._count_sources(sources)
        for d in diagnostics:
            if d.kind == "no_assistant_turns":
                self.empty_conversations += 1
                continue
            self.dropped_turns += len(d.turns)
            self.dropped_by_kind[d.kind] = self.dropped_by_kind.get(d.kind, 0) + len(d.turns)
            if len(self.dropped) < self.MAX_REASONS:
                self.dropped.append(f"conversation {index}: {d.kind}: {d.detail}")

    def _count_sources(self, sources: dict | None) -> None:
        for i, source in (sources or {}).items():
            if i > 0:  # an assistant message with nothing before it is context, never a trained turn
                self.source_assistant_turns += 1
                self.source_tool_calls += source.num_calls
                self.source_think_words += source.think_words

    def skip(self, index: int, exc: Exception, sources: dict | None = None) -> None:
        """A conversation left out whole; its source turns still count (as not trained)."""
        self._count_sources(sources)
        self.conversations += 1
        self.skipped_conversations += 1
        if len(self.skipped) < self.MAX_REASONS:
            self.skipped.append(f"conversation {index}: {exc}")


def example_row(example: TokenExample, conversation: int) -> dict[str, Any]:
    """The flat record written per example (same keys in Parquet and JSONL)."""
    m = example.metadata
    return {"input_ids": example.input_ids, "labels": example.labels, "conversation": conversation,
            "window_index": m.window_index, "num_windows": m.num_windows, "turns": m.turns,
            "trainable_tokens": m.trainable_tokens, "num_tokens": m.num_tokens}


SUFFIXES = (".parquet", ".jsonl")


def _token_schema():
    """Parquet column types of :func:`example_row`; token columns are ``list<int32>``."""
    import pyarrow as pa

    ints = pa.list_(pa.int32())
    return pa.schema([("input_ids", ints), ("labels", ints), ("conversation", pa.int64()),
                      ("window_index", pa.int32()), ("num_windows", pa.int32()), ("turns", ints),
                      ("trainable_tokens", pa.int32()), ("num_tokens", pa.int32())])


def load_tokenizer(path: str):
    """A Hugging Face tokenizer with a chat template from a LOCAL folder (never a hub download)."""
    from trajkit.models.load import load_tokenizer as load, local_folder

    tok = load(local_folder(str(path)), what="--tokenizer")
    if not tok.chat_template:
        raise ConfigError(f"tokenizer {str(path)!r} has no chat template; use a chat model's tokenizer")
    return tok


Outcome = tuple[int, list[TokenExample], list[Diagnostic], InputError | None, dict | None]


@dataclass(frozen=True)
class Plan:
    """What every conversation of one export shares: the config, the resolved split, the role headers."""

    config: TokenizeConfig
    split: str | None = None
    headers: tuple[str, ...] = ()


def _unpack(item) -> tuple[Any, Any, dict | None]:
    """A ``ChatConversation`` or a plain ``(messages, tools)`` pair -> (messages, tools, sources)."""
    if isinstance(item, tuple):
        return item[0], item[1], None
    return item.messages, item.tools, item.sources


def _tokenize_batch(tok, plan: Plan, batch: list[tuple[int, Any]]) -> list[Outcome]:
    items = [_unpack(conversation) for _, conversation in batch]
    results = tokenize_batch(tok, items, plan.config, headers=plan.headers, split=plan.split)
    return [(k, examples, diagnostics, exc, item[2])
            for (k, _), item, (examples, diagnostics, exc) in zip(batch, items, results)]


_WORKER: dict[str, Any] = {}  # per worker process: its tokenizer and plan


def _worker_init(tokenizer, plan: Plan) -> None:
    _WORKER.update(tok=load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer, plan=plan)


def _worker_batch(batch: list[tuple[int, Any]]) -> list[Outcome]:
    return [(k, examples, diagnostics, None if exc is None else InputError(str(exc)), sources)  # picklable
            for k, examples, diagnostics, exc, sources in _tokenize_batch(_WORKER["tok"], _WORKER["plan"], batch)]


def _batches(items, size: int):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _strict_failure(diagnostics: list[Diagnostic], strict: bool) -> InputError | None:
    """With ``strict``, a failed source check stops the export like any bad conversation."""
    failed = [d for d in diagnostics if d.kind == "source_check"] if strict else []
    return InputError(failed[0].detail) if failed else None


def export_tokens(conversations, tokenizer, config: TokenizeConfig | None, out_path, *, strict: bool = False,
                  progress: bool = True, total: int | None = None, workers: int = 1,
                  split: str | None = None, headers: tuple[str, ...] = ()) -> ExportSummary:
    """Tokenize conversations (``ChatConversation``s from :mod:`trajkit.traces.export.sft_render`, checked against
    their sources, or plain ``(messages, tools)`` pairs) and write every checked example to ``out_path``.

    The suffix picks the format: ``.parquet`` (list<int32> token columns) or ``.jsonl``. A conversation
    that raises :class:`InputError` is skipped and counted (``strict=True``: raised, with its index).
    ``workers > 1`` tokenizes in that many spawned processes, batch by batch (output order and content
    are the same). The file is written atomically (:class:`trajkit.traces.write.RowWriter`): it appears
under ``out_path`` complete, or not at all.
    """
    import multiprocessing

    from trajkit.progress import progress_bar

    config = config or TokenizeConfig()
    suffix = Path(out_path).suffix.lower()
    if suffix not in SUFFIXES:
        raise ConfigError(f"output {str(out_path)!r} must end in {' or '.join(SUFFIXES)}")
    if not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers must be an integer >= 1, got {workers!r}")
    source = str(tokenizer) if isinstance(tokenizer, (str, os.PathLike)) else tokenizer
    tok = load_tokenizer(source) if isinstance(source, str) else source
    summary = ExportSummary(out_path=str(out_path))
    plan = Plan(config, split, headers)
    pool = multiprocessing.get_context("spawn").Pool(workers, _worker_init, (source, plan)) if workers > 1 else None
    writer = RowWriter(out_path, schema=_token_schema() if suffix == ".parquet" else None).open()  # atomic
    try:
        bar = progress_bar(total=total, desc="tokenize", unit="conv", enabled=progress)
        for batch in _batches(enumerate(conversations), BATCH * workers):
            outcomes = ([o for part in pool.map(_worker_batch, list(_batches(batch, BATCH))) for o in part]
                        if pool else _tokenize_batch(tok, plan, batch))
            for k, examples, diagnostics, exc, sources in outcomes:
                exc = exc or _strict_failure(diagnostics, strict)
                if exc is not None:
                    if strict:
                        exc.row = k
                        exc.args = (exc._render(),)
                        raise exc
                    summary.skip(k, exc, sources)
                    continue
                summary.add(examples, diagnostics, k, sources)
                for ex in examples:
                    writer.write(example_row(ex, k))
            bar.update(len(batch))
            bar.set_postfix(examples=summary.examples, skipped=summary.skipped_conversations, refresh=False)
        bar.close()
    except BaseException:
        writer.abort()  # the old file under out_path, if any, stays as it was
        raise
    finally:
        if pool is not None:
            pool.terminate()
    writer.close()
    return summary


@dataclass
class TraceCounts:
    """Traces read by :func:`export_trace_tokens` and those skipped for malformed calls."""

    traces: int = 0
    skipped_malformed: int = 0


def export_trace_tokens(traces, tokenizer, config: TokenizeConfig | None, out_path, *, system: str = "auto",
                        malformed: str = "skip", strict: bool = False, progress: bool = True,
                        workers: int = 1) -> tuple[ExportSummary, TraceCounts]:
    """Token export of traces for ``tokenizer``'s chat template: probe the template, write every trace the
    way that loses nothing (:mod:`trajkit.traces.export.template_probe`, :mod:`trajkit.traces.export.sft_render`), split
    as the template needs, and check every example against its source trace."""
    from trajkit.traces.export.sft_render import render_trace
    from trajkit.traces.export.source_check import role_headers
    from trajkit.traces.export.template_probe import choose_rendering, probe_template

    config = config or TokenizeConfig()
    tok = load_tokenizer(str(tokenizer)) if isinstance(tokenizer, (str, os.PathLike)) else tokenizer
    info = probe_template(tok)
    rendering = choose_rendering(info, config.render_mode)
    counts = TraceCounts()

    def conversations():
        for trace in traces:
            counts.traces += 1
            try:
                yield render_trace(trace, rendering, system=system, malformed=malformed)
            except InputError:
                if malformed == "error":
                    raise
                counts.skipped_malformed += 1

    source = str(tokenizer) if isinstance(tokenizer, (str, os.PathLike)) and workers > 1 else tok
    summary = export_tokens(conversations(), source, config, out_path, strict=strict, progress=progress,
                            workers=workers, split=rendering.split, headers=role_headers(tok))
    summary.template = {"probe": info.as_dict(), "rendering": dataclasses.asdict(rendering)}
    return summary, counts
