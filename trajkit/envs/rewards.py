"""Reward functions as TRL's ``GRPOTrainer`` calls them, combined with weights and logged by name.

A reward function is a plain callable::

    def reward(prompts, completions, completion_ids, **columns) -> list[float | None]

- ``prompts[i]``: the prompt as the task gave it: a list of chat messages (conversational tasks) or a
  string (plain-text tasks);
- ``completions[i]``: the completion in the same form: ``[{"role": "assistant", "content": text}]`` (a
  multi-turn tool episode: every assistant and tool message after the prompt) or the text;
- ``completion_ids[i]``: the completion's token ids as sampled (a tool episode's forced tokens included);
- ``**columns``: every other column of the prompt's row (``answer``, ``solution``, ...), one value per
  completion; plus ``log_metric(name, value)`` to log a scalar and ``log_extra(name, values)`` to attach
  a value to each sample's log record.

It returns one value per completion; ``None`` means "not applicable" (TRL's convention). The total is
the weighted sum over functions, skipping ``None``; a completion that no function scores is *unscorable*:
its reward is NaN, it is left out of its group's baseline and gets advantage 0 (:mod:`trajkit.rl.scoring`).
So TRL's own reward functions run unchanged, e.g. ``trl.rewards.think_format_reward``.

>>> def exact(completions, answer, **kwargs):
...     return [float(c == a) for c, a in zip(completions, answer)]
>>> def short(completions, **kwargs):
...     return [None if c == "" else -0.1 * len(c) for c in completions]
>>> rs = RewardSet.build([exact, short], weights=[1.0, 0.5])
>>> rs.compute(["2+2=", "2+2="], ["4", ""], [[52], []], [{"answer": "4"}, {"answer": "4"}])[0]
[0.95, 0.0]
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from trajkit.errors import ConfigError
from trajkit.envs.sample import Sample

RewardFunc = Callable[..., Sequence[Any]]
RESERVED = ("prompts", "completions", "completion_ids", "log_metric", "log_extra")


def completion_content(completion: str | list[dict]) -> str:
    """A completion's final text: the string itself, or the content of its last message."""
    if isinstance(completion, str):
        return completion
    return str(completion[-1].get("content") or "") if completion else ""


def reward_name(func: RewardFunc) -> str:
    """The name a reward is logged under: the function's ``__name__`` (a class instance: its class name)."""
    return getattr(func, "__name__", None) or type(func).__name__


@dataclass
class RewardSet:
    """Reward functions, their weights and unique names (``reward/<name>`` in the metrics)."""

    funcs: list[RewardFunc]
    weights: list[float]
    names: list[str]
    extra: dict[str, float] = field(default_factory=dict)

    @classmethod
    def build(cls, funcs: RewardFunc | Sequence[RewardFunc], weights: Sequence[float] | None = None) -> RewardSet:
        funcs = [funcs] if callable(funcs) else list(funcs)
        if not funcs:
            raise ConfigError("rewards: at least one reward function is needed")
        for i, f in enumerate(funcs):
            if not callable(f):
                raise ConfigError(f"rewards[{i}]: {f!r} is not callable (a reward is a function "
                                  "(prompts, completions, completion_ids, **columns) -> list[float | None])")
        weights = [1.0] * len(funcs) if weights is None else [float(w) for w in weights]
        if len(weights) != len(funcs):
            raise ConfigError(f"reward_weights: {len(weights)} weights for {len(funcs)} reward functions")
        names: list[str] = []
        for f in funcs:
            name = reward_name(f)
            names.append(name if name not in names else f"{name}_{len(names)}")
        return cls(funcs, weights, names)

    def compute(self, prompts: list, completions: list, completion_ids: list[list[int]],
                columns: list[dict]) -> tuple[list[float], dict[str, list[float]], list[dict]]:
        """-> (total per completion, NaN where unscorable; each function's values, NaN for None; the
        ``log_extra`` values per completion)."""
        n = len(completions)
        keys = sorted({k for row in columns for k in row} - set(RESERVED))
        kwargs = {k: [row.get(k) for row in columns] for k in keys}
        extras: list[dict] = [{} for _ in range(n)]
        self.extra = {}

        def log_metric(name: str, value: float) -> None:
            self.extra[name] = float(value)

        def log_extra(name: str, values: Sequence[Any]) -> None:
            for row, value in zip(extras, values):
                row[name] = value

        per: dict[str, list[float]] = {}
        for func, name in zip(self.funcs, self.names):
            out = func(prompts=prompts, completions=completions, completion_ids=completion_ids,
                       log_metric=log_metric, log_extra=log_extra, **kwargs)
            out = list(out) if out is not None else []
            if len(out) != n:
                raise ConfigError(f"reward function {name!r} returned {len(out)} values for {n} completions "
                                  "(it must return one float or None per completion)")
            values = []
            for i, v in enumerate(out):
                if v is None:
                    values.append(math.nan)
                    continue
                try:
                    values.append(float(v))
                except (TypeError, ValueError):
                    raise ConfigError(f"reward function {name!r} returned {v!r} for completion {i}; "
                                      "return a float or None") from None
                if not math.isfinite(values[-1]):
                    raise ConfigError(f"reward function {name!r} returned {v!r} for completion {i}; "
                                      "return a finite float, or None for 'not applicable'")
            per[name] = values
        totals = []
        for i in range(n):
            scored = [(w, per[name][i]) for w, name in zip(self.weights, self.names) if not math.isnan(per[name][i])]
            totals.append(sum(w * v for w, v in scored) if scored else math.nan)
        return totals, per, extras

    def __call__(self, samples: Sequence[Sample]) -> tuple[list[float], dict[str, float]]:
        """Score rollouts: -> (total per sample, NaN where unscorable; ``reward/<name>`` means and the
        functions' logged metrics). Reads ``prompt``, ``completion`` and ``columns`` from each sample's
        metadata (the environments put them there)."""
        for i, s in enumerate(samples):
            missing = [k for k in ("prompt", "completion") if k not in s.metadata]
            if missing:
                raise ConfigError(f"sample {i}: metadata lacks {missing}; an environment must record the prompt "
                                  "and completion it rewards (see trajkit.envs.single_turn.SingleTurnEnv)")
        totals, per, extras = self.compute([s.metadata["prompt"] for s in samples],
                                           [s.metadata["completion"] for s in samples],
                                           [list(s.completion_ids) for s in samples],
                                           [s.metadata.get("columns", {}) for s in samples])
        for s, extra in zip(samples, extras):
            if extra:
                s.metadata.setdefault("reward_extra", {}).update(extra)
        metrics = {}
        for name, values in per.items():
            scored = [v for v in values if not math.isnan(v)]
            metrics[f"reward/{name}"] = sum(scored) / len(scored) if scored else math.nan
        metrics.update({f"reward/extra/{k}": v for k, v in self.extra.items()})
        return totals, metrics


def resolve(spec: str | RewardFunc, what: str = "rewards") -> RewardFunc:
    """A reward given by import path (``"pkg.mod:func"``) or already a callable."""
    if callable(spec):
        return spec
    from trajkit.envs.imports import import_object

    return import_object(spec, what)
