"""Optimisers beside the standard ones: LoGRA (low-rank gradient sketches, RowAdam, KL-budgeted steps) and
Muon on the hidden matrices with AdamW on the rest, as one optimiser (:mod:`trajkit.optim.muon`).

See docs/optim.md. ``trajkit.optim`` sits on ``trajkit.models`` only; ``trajkit.rl`` uses it.
"""
from trajkit.optim.kl import exact_kl, tangent_kl
from trajkit.optim.logra import LoGRA
from trajkit.optim.muon import MuonAdamW, split_parameters
from trajkit.optim.projection import DISTRIBUTIONS, make_projection, projection_seed
from trajkit.optim.row_adam import row_adam_direction, sgd_direction
from trajkit.optim.sketch import (
           DEFAULT_TARGETS,
           Sketches,
           SketchSettings,
           install_sketches,
           select_targets,
)

__all__ = ["DEFAULT_TARGETS", "DISTRIBUTIONS", "LoGRA", "MuonAdamW", "SketchSettings", "Sketches", "exact_kl",
           "install_sketches", "make_projection", "projection_seed", "row_adam_direction", "select_targets",
           "sgd_direction", "split_parameters", "tangent_kl"]
