"""The ``trajkit`` command tree. Thin: it parses flags and calls library functions."""
