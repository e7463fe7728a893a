"""Benchmarks runnable as ``trajkit bench NAME`` (see benchmarks/ for script wrappers)."""
