"""YaRN: a longer context window for a RoPE model, written into its Hugging Face config.

YaRN (B. Peng, J. Quesnelle, H. Fan, E. Shippole, "YaRN: Efficient Context Window Extension of Large
Language Models", arXiv 2309.00071) extends a model pretrained on ``L`` positions to ``s L``: each rotary
frequency whose wavelength is short against ``L`` (more than ``beta_fast`` turns over ``L``) is kept, each
one whose wavelength is long (fewer than ``beta_slow`` turns) is divided by ``s`` (position
interpolation), the ones between are blended linearly, and the attention logits are scaled by
``(0.1 ln s + 1)^2`` (applied as ``0.1 ln s + 1`` on cos and sin). The arithmetic is transformers' own
(``_compute_yarn_parameters``); this module only writes the parameters where transformers reads them:

- ``config.rope_parameters`` (transformers 5.x; ``rope_scaling`` is its deprecated alias) becomes
  ``{"rope_type": "yarn", "factor": s, "original_max_position_embeddings": L, "beta_fast", "beta_slow",
  "rope_theta", ...}`` (the model's other rope keys, e.g. ``partial_rotary_factor``, kept);
- ``config.max_position_embeddings`` becomes ``int(s L)``: trajkit's engine refuses rows past it, the
  gateway enforces it and reports it as ``max_model_len``, and a saved checkpoint carries both, so
  ``from_pretrained`` loads the extended model (vLLM was not tried). The SFT export checks its
  ``--max-length`` against the same window (:func:`folder_window`).

Applying the same scaling to a config that already has it is a no-op (a checkpoint of a scaled run loads
as it was saved); any other rope type already there is refused, as are per-layer rope parameters.

Deviation: none in the arithmetic. ``original_max_position_embeddings`` defaults to the model's own
``max_position_embeddings`` (what it was pretrained on, for SmolLM2 8,192), and ``attention_factor`` 0 means
YaRN's ``0.1 ln s + 1``. Fine-tuning at the new length, as the paper does (400 steps), is the user's run.

>>> scaling = RopeScaling(type="yarn", factor=4.0)
>>> scaling.window(8192)
32768
"""
from __future__ import annotations

import json
import math
import types
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Literal

from trajkit.config import Checked
from trajkit.errors import ConfigError


@dataclass
class RopeScaling(Checked):
    """Rotary position scaling: ``type`` ``none`` (the model as it is) or ``yarn`` (``factor`` > 1 times the
    window; ``original_max_position_embeddings`` 0 = the model's ``max_position_embeddings``; ``beta_fast``,
    ``beta_slow``: YaRN's ramp bounds in turns over the original window; ``attention_factor`` 0 = YaRN's
    0.1 ln(factor) + 1)."""

    type: Literal["none", "yarn"] = "none"
    factor: float = 1.0
    original_max_position_embeddings: int = 0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    attention_factor: float = 0.0

    __section__ = "rope_scaling"
    __ranges__ = {"factor": "[1, inf)", "original_max_position_embeddings": "[0, inf)", "beta_fast": "(0, inf)",
                  "beta_slow": "(0, inf)", "attention_factor": "[0, inf)"}
    __field_docs__ = {"type": "rotary scaling: none, or yarn (YaRN, arXiv 2309.00071)",
                      "factor": "YaRN: the window grows this many times (> 1)",
                      "original_max_position_embeddings": "YaRN: the pretrained window (0 = the model's "
                                                          "max_position_embeddings)",
                      "beta_fast": "YaRN: frequencies with more turns than this over the window are kept",
                      "beta_slow": "YaRN: frequencies with fewer turns than this are interpolated",
                      "attention_factor": "YaRN: cos/sin scale (0 = 0.1 ln(factor) + 1)"}

    def validate(self) -> None:
        if self.type == "yarn" and not self.factor > 1:
            raise ConfigError(f"rope_scaling.factor must be > 1 for type yarn (the window grows factor times), "
                              f"got {self.factor}")
        if self.type == "none" and any(getattr(self, f.name) != f.default for f in fields(self)):
            raise ConfigError("rope_scaling: factor and the other YaRN keys need rope_scaling.type=yarn")
        if self.beta_slow >= self.beta_fast:
            raise ConfigError(f"rope_scaling.beta_slow ({self.beta_slow}) must be < beta_fast ({self.beta_fast})")

    @property
    def active(self) -> bool:
        return self.type != "none"

    def window(self, original: int) -> int:
        """The scaled window of a model pretrained on ``original`` positions (``original`` when off)."""
        base = self.original_max_position_embeddings or original
        return int(base * self.factor) if self.active else original


def yarn_parameters(config, scaling: RopeScaling) -> tuple[dict, int]:
    """-> (``rope_parameters`` for ``config``, its new ``max_position_embeddings``); pure, ``config`` unread
    past its rope keys and window."""
    current = dict(getattr(config, "rope_parameters", None) or {})
    if current and "rope_type" not in current and all(isinstance(v, dict) for v in current.values()):
        raise ConfigError(f"rope_scaling: {type(config).__name__} has rope parameters per layer type "
                          f"({', '.join(current)}); trajkit's YaRN writes one global set")
    kind = current.get("rope_type", current.get("type", "default"))
    original = current.get("original_max_position_embeddings") if kind == "yarn" else None
    original = scaling.original_max_position_embeddings or original or config.max_position_embeddings
    wanted = {"rope_type": "yarn", "factor": float(scaling.factor), "original_max_position_embeddings": int(original),
              "beta_fast": float(scaling.beta_fast), "beta_slow": float(scaling.beta_slow)}
    if scaling.attention_factor:
        wanted["attention_factor"] = float(scaling.attention_factor)
    if kind == "yarn":
        same = all(current.get(k) == v for k, v in wanted.items()) and (
            scaling.attention_factor or current.get("attention_factor") is None)
        if not same:
            have = {k: current.get(k) for k in wanted}
            raise ConfigError(f"rope_scaling: the model already has YaRN {have}, not {wanted}; load the "
                              "unscaled model, or give the same rope_scaling")
    elif kind != "default":
        raise ConfigError(f"rope_scaling: the model already uses rope type {kind!r}; trajkit's YaRN scales "
                          "plain RoPE only")
    if "rope_theta" not in current:
        theta = getattr(config, "rope_theta", None)
        if theta is None:
            raise ConfigError(f"rope_scaling: {type(config).__name__} has no rope_theta (not a RoPE model?)")
        current["rope_theta"] = theta
    current.pop("type", None)
    current.update(wanted)
    return current, int(math.floor(original * scaling.factor))


def apply_rope_scaling(config, scaling: RopeScaling | None) -> None:
    """Write ``scaling`` into the Hugging Face ``config`` in place (nothing when None or ``type=none``)."""
    if scaling is None or not scaling.active:
        return
    params, window = yarn_parameters(config, scaling)
    config.rope_parameters = params
    config.max_position_embeddings = window


def needs_rescaling(model, scaling: RopeScaling | None) -> bool:
    """Whether ``model``'s config lacks ``scaling`` (False when off; an error when it conflicts)."""
    if scaling is None or not scaling.active:
        return False
    params, window = yarn_parameters(model.config, scaling)
    return not (params == dict(model.config.rope_parameters) and window == model.config.max_position_embeddings)


def rescaled(model, scaling: RopeScaling | None):
    """An in-memory HF causal LM with ``scaling`` applied: the same class rebuilt from the scaled config
    (its rotary tables are computed at construction) holding ``model``'s weights; ``model`` itself when
    ``scaling`` is off or already in its config. Same dtype and device, train/eval mode kept."""
    if not needs_rescaling(model, scaling):
        return model
    import copy

    import torch

    config = copy.deepcopy(model.config)
    apply_rope_scaling(config, scaling)
    param = next(model.parameters())
    with torch.random.fork_rng(devices=[]):  # the throwaway initialisation must not move the caller's RNG
        out = type(model)(config).to(device=param.device, dtype=param.dtype)
    out.load_state_dict(model.state_dict())
    out.generation_config = copy.deepcopy(model.generation_config)  # the folder's eos/pad ids, not defaults
    return out.train(model.training)


def folder_window(folder: str | Path, scaling: RopeScaling | None = None) -> int | None:
    """The positions a model folder's ``config.json`` allows, with ``scaling`` applied; None for a folder
    without a model config (a tokenizer alone). Reads the JSON only (no transformers import)."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        return None
    raw = json.loads(path.read_text(encoding="utf-8"))
    window = raw.get("max_position_embeddings")
    if not isinstance(window, int):
        return None
    if scaling is None or not scaling.active:
        return window
    config = types.SimpleNamespace(max_position_embeddings=window, rope_theta=raw.get("rope_theta"),
                                   rope_parameters=raw.get("rope_parameters") or raw.get("rope_scaling"))
    return yarn_parameters(config, scaling)[1]
