"""Write token-id SFT examples (format (b)) to Parquet or JSONL, with a progress bar and a summary.

Each conversation goes through :func:`trajkit.traces.tokenize.tokenize_conversation` (prefix rendering,
think policy, windowing, mask check on every example); the examples stream to disk in batches, so memory
stays bounded whatever the corpus size. A conversation that raises :class:`InputError` is skipped and
counted, never silently lost; ``strict=True`` raises instead, naming its index.

Row layout (same keys in both formats)::

    {"input_ids": [...], "labels": [...], "conversation": 12, "window_index": 0, "num_windows": 2,
     "turns": [2, 4], "trainable_tokens": 311, "num_tokens": 2048}
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from trajkit.errors import ConfigError, InputError
from trajkit.traces.tokenize import Diagnostic, TokenExample, TokenizeConfig, tokenize_conversation
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
    empty_conversations: int = 0  # no trainable assistant turn
    dropped_by_kind: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # the first reasons, "conversation K: why"

    MAX_REASONS: ClassVar[int] = 20

    def add(self, examples: list[TokenExample], diagnostics: list[Diagnostic]) -> None:
        self.conversations += 1
        self.examples += len(examples)
        self.windowed_conversations += len(examples) > 1
        for ex in examples:
            self.tokens += ex.metadata.num_tokens
            self.trainable_tokens += ex.metadata.trainable_tokens
            self.trained_turns += len(ex.metadata.turns)
        for d in diagnostics:
            if d.kind == "no_assistant_turns":
                self.empty_conversations += 1
                continue
            self.dropped_turns += len(d.turns)
            self.dropped_by_kind[d.kind] = self.dropped_by_kind.get(d.kind, 0) + len(d.turns)

    def skip(self, index: int, exc: Exception) -> None:
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
    """A Hugging Face tokenizer from a LOCAL directory (never a hub download)."""
    from transformers import AutoTokenizer

    if not os.path.isdir(path):
        raise ConfigError(f"tokenizer {path!r} is not a local directory; pass a folder holding tokenizer.json "
                          "and tokenizer_config.json with a chat template (hub names are not downloaded)")
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if not tok.chat_template:
        raise ConfigError(f"tokenizer {path!r} has no chat template; use a chat model's tokenizer")
    return tok


Outcome = tuple[int, list[TokenExample], list[Diagnostic], InputError | None]


def _tokenize_item(tok, config: TokenizeConfig, item: tuple[int, tuple[Any, Any]]) -> Outcome:
    k, (messages, tools) = item
    diagnostics: list[Diagnostic] = []
    try:
        return k, tokenize_conversation(tok, messages, tools, config, diagnostics=diagnostics), diagnostics, None
    except InputError as exc:
        return k, [], diagnostics, exc


_WORKER: dict[str, Any] = {}  # per worker process: its tokenizer and config


def _worker_init(tokenizer, config: TokenizeConfig) -> None:
    _WORKER.update(tok=load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer, config=config)


def _worker_item(item: tuple[int, tuple[Any, Any]]) -> Outcome:
    k, examples, diagnostics, exc = _tokenize_item(_WORKER["tok"], _WORKER["config"], item)
    return k, examples, diagnostics, None if exc is None else InputError(str(exc))  # picklable


def _batches(items, size: int):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def export_tokens(conversations, tokenizer, config: TokenizeConfig | None, out_path, *, strict: bool = False,
                  progress: bool = True, total: int | None = None, workers: int = 1) -> ExportSummary:
    """Tokenize ``(messages, tools)`` pairs and write every checked example to ``out_path``.

    The suffix picks the format: ``.parquet`` (list<int32> token columns) or ``.jsonl``. A conversation
    that raises :class:`InputError` is skipped and counted (``strict=True``: raised, with its index).
    ``workers > 1`` tokenizes in that many spawned processes, batch by batch (output order and content
    are the same). The file is written beside ``out_path`` as ``.partial-NAME`` and renamed when complete.
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
    out = Path(out_path)
    summary, tmp = ExportSummary(out_path=str(out_path)), out.with_name(f".partial-{out.name}")
    pool = multiprocessing.get_context("spawn").Pool(workers, _worker_init, (source, config)) if workers > 1 else None
    writer = RowWriter(tmp, schema=_token_schema() if suffix == ".parquet" else None).open()
    try:
        bar = progress_bar(total=total, desc="tokenize", unit="conv", enabled=progress)
        for batch in _batches(enumerate(conversations), 16 * workers if pool else 1):
            outcomes = pool.map(_worker_item, batch) if pool else [_tokenize_item(tok, config, it) for it in batch]
            for k, examples, diagnostics, exc in outcomes:
                if exc is not None:
                    if strict:
                        exc.row = k
                        exc.args = (exc._render(),)
                        raise exc
                    summary.skip(k, exc)
                    continue
                summary.add(examples, diagnostics)
                for ex in examples:
                    writer.write(example_row(ex, k))
            bar.update(len(batch))
            bar.set_postfix(examples=summary.examples, skipped=summary.skipped_conversations, refresh=False)
        bar.close()
    except BaseException:
        writer.close()
        os.remove(tmp)
        raise
    finally:
        if pool is not None:
            pool.terminate()
    writer.close()
    os.replace(tmp, out_path)
    return summary
