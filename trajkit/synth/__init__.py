"""Seeded synthetic agent traces in the Hermes ShareGPT format, with their counts known by construction.

Used by the tests, the demo and the benchmarks (never by :mod:`trajkit.traces`, which it builds on).
Modules: ``generator`` (config, :class:`Truth`, rows, corpus files, the bundled sample), ``build``
(planning, filling and rendering one row), ``sim`` (tool arguments and results), ``text`` (scenes and
prose), ``tools`` (the tool catalogue and system prompt).

Example::

    >>> from trajkit.synth import SynthConfig, generate
    >>> rows = list(generate(SynthConfig(rows=2, style="glm-5.1")))
"""
from trajkit.synth.generator import (MALFORMED_KINDS, SAMPLE_CONFIGS, STYLE_DEFAULTS, STYLES, SynthConfig, Truth,
                                     build_sample, generate, generate_with_truth, make_row, sample_paths,
                                     sample_with_truth, truth_of, write_corpus)

__all__ = ["SynthConfig", "Truth", "STYLES", "MALFORMED_KINDS", "STYLE_DEFAULTS", "SAMPLE_CONFIGS", "generate",
           "generate_with_truth", "make_row", "truth_of", "write_corpus", "build_sample", "sample_paths",
           "sample_with_truth"]
