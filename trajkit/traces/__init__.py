"""Agent reasoning traces: model, parsers, loaders, metrics, plots, report, SFT export, filters."""
