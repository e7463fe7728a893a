"""The SFT export: traces -> training data that keeps every token of its source.

- :mod:`~trajkit.traces.export.sft`: OpenAI chat-messages JSONL (``traces export --format openai``);
- :mod:`~trajkit.traces.export.template_probe`: what a chat template renders (tools, calls, reasoning) and
  the rendering that loses nothing; :mod:`~trajkit.traces.export.sft_render`: a trace as that rendering;
- :mod:`~trajkit.traces.export.tokenize` (the algorithm: prefix rendering, assistant-only labels),
  :mod:`~trajkit.traces.export.windowing` (long conversations as windows, not truncations),
  :mod:`~trajkit.traces.export.token_records` (the config and records),
  :mod:`~trajkit.traces.export.source_check` (each trained turn holds its source turn) and
  :mod:`~trajkit.traces.export.token_export` (files: ``traces export --format tokens``).

See docs/export.md.
"""
