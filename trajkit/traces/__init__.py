"""Agent reasoning traces: model, parsers, loaders, metrics, plots, report, filters; the SFT export in
:mod:`trajkit.traces.export`."""

from trajkit._lazy import moved_modules

moved_modules({"trajkit.traces.atomic": "trajkit.atomic"})  # its home before it moved to the ground floor
# the SFT export's modules, flat here before they became their own folder (docs/architecture.md)
moved_modules({f"trajkit.traces.{name}": f"trajkit.traces.export.{name}"
               for name in ("tokenize", "windowing", "token_export", "token_records", "template_probe",
                            "source_check", "sft", "sft_render")})
