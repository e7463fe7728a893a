"""Agent reasoning traces: model, parsers, loaders, metrics, plots, report, SFT export, filters."""

from trajkit._lazy import moved_modules

moved_modules({"trajkit.traces.atomic": "trajkit.atomic"})  # its home before it moved to the ground floor
