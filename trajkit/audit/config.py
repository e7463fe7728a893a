"""The configs of the audit checks: thresholds and settings, each default declared once. Light to import
(no numpy, no datasketch), so the CLI derives its flags from them at parser build."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from trajkit.config import Checked
from trajkit.errors import ConfigError


@dataclass
class LeakConfig(Checked):
    """Thresholds of the leak checks; each default is the one the module docstring cites."""

    ngram: int = 13
    short_ngram: int = 8
    shingle: int = 5
    jaccard: float = 0.8
    num_perm: int = 128
    minhash_seed: int = 1

    __field_docs__: ClassVar[dict[str, str]] = {
        "ngram": "n of the n-gram overlap check (words, after normalisation)",
        "short_ngram": "n for eval items shorter than --ngram words (shorter still: exact check only)",
        "shingle": "words per shingle of the near-duplicate check",
        "jaccard": "Jaccard similarity at or above which a pair is a near-duplicate (WARN)",
        "num_perm": "MinHash permutations",
        "minhash_seed": "seed of the MinHash permutations",
    }
    __ranges__ = {"ngram": "[1, inf)", "short_ngram": "[1, inf)", "shingle": "[1, inf)", "jaccard": "(0, 1]",
                  "num_perm": "[16, inf)", "minhash_seed": "[0, inf)"}

    def validate(self) -> None:
        if self.short_ngram > self.ngram:
            raise ConfigError(f"short_ngram ({self.short_ngram}) must be <= ngram ({self.ngram})")


@dataclass
class SeedConfig(Checked):
    """Settings of the seed audit; every default is declared here once."""

    metric: str = "eval/reward"
    claim: Literal["gain", "no_worse"] = "gain"
    margin: float = 0.0
    last_k: int = 3
    min_seeds: int = 3
    confidence: float = 0.95
    reps: int = 2000
    bootstrap_seed: int = 0
    min_probability: float = 0.75
    alpha: float = 0.05
    higher_is_better: bool = True
    paired: bool = False
    component: str = ""
    component_weight: float = 1.0
    max_component_share: float = 0.5

    __field_docs__: ClassVar[dict[str, str]] = {
        "metric": "the metrics.jsonl key to compare",
        "claim": "gain: the candidate beats the baseline; no_worse: it is within a margin of it (non-inferiority)",
        "margin": "no_worse: the loss tolerated (metric units); 0 = the baseline's between-seed standard deviation",
        "last_k": "a run's score: the mean of its last k evaluations after step 0",
        "min_seeds": "seeds per arm below which the claim is refused",
        "confidence": "confidence level of the interval (bootstrap; Student t, or its sign test, with --paired)",
        "reps": "bootstrap resamples",
        "bootstrap_seed": "seed of the bootstrap resampling",
        "min_probability": "probability of improvement below which the check warns",
        "alpha": "significance level of Welch's t",
        "higher_is_better": "false when a lower metric is better (a loss)",
        "paired": "each candidate run continues the baseline run of its seed (RL from that seed's SFT checkpoint): "
                  "compare per-seed differences (paired t) instead of independent arms",
        "component": "a reward function's name (e.g. a format reward): the share of the gain it accounts for",
        "component_weight": "that function's weight in the total reward (reward_weights)",
        "max_component_share": "share of the gain from --component above which the check warns",
    }
    __ranges__ = {"margin": "[0, inf)", "last_k": "[1, inf)", "min_seeds": "[2, inf)", "confidence": "(0, 1)", "reps": "[100, inf)",
                  "bootstrap_seed": "[0, inf)", "min_probability": "(0.5, 1]", "alpha": "(0, 1)",
                  "max_component_share": "(0, 1]"}
