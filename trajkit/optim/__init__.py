"""Optimisers beside the standard ones: LoGRA (low-rank gradient sketches, RowAdam, KL-budgeted steps) and
Muon on the hidden matrices with AdamW on the rest, as one optimiser (:mod:`trajkit.optim.muon`).

See docs/optim.md. ``trajkit.optim`` sits on ``trajkit.models`` only; ``trajkit.rl`` uses it. The exports
load lazily (PEP 562): configs read :mod:`.defaults` without importing torch.
"""
from trajkit._lazy import lazy_getattr

_EXPORTS = {
    "exact_kl": "trajkit.optim.kl",
    "tangent_kl": "trajkit.optim.kl",
    "LoGRA": "trajkit.optim.logra",
    "MuonAdamW": "trajkit.optim.muon",
    "split_parameters": "trajkit.optim.muon",
    "DISTRIBUTIONS": "trajkit.optim.projection",
    "make_projection": "trajkit.optim.projection",
    "projection_seed": "trajkit.optim.projection",
    "row_adam_direction": "trajkit.optim.row_adam",
    "sgd_direction": "trajkit.optim.row_adam",
    "DEFAULT_TARGETS": "trajkit.optim.defaults",
    "SketchSettings": "trajkit.optim.sketch",
    "Sketches": "trajkit.optim.sketch",
    "install_sketches": "trajkit.optim.sketch",
    "select_targets": "trajkit.optim.sketch",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
