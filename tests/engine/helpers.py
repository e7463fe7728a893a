"""Shared references for the engine tests: random tiny models, exact continuation distributions, and a
pooled chi-square goodness-of-fit test."""
from __future__ import annotations

import copy
import itertools

import numpy as np
import torch
from scipy import stats as sstats

from trajkit.engine.params import SamplingParams
from trajkit.engine.warp import row_params, warp_probs
from trajkit.models.spec import TinySpec, build_model

SPEC = TinySpec(vocab_size=12, hidden_size=16, num_layers=2, num_heads=2, num_kv_heads=1,
                intermediate_size=32)


def target_model(spec: TinySpec = SPEC, seed: int = 0, dtype: torch.dtype = torch.float32):
    """A random model with peaked next-token distributions (init scale 15)."""
    return build_model(spec, seed, init_scale=15.0, dtype=dtype)


def perturbed_copy(model, noise: float, seed: int):
    """A drafter close to ``model``: every weight plus Gaussian noise of ``noise`` x its own std."""
    draft = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * noise * p.std())
    return draft


@torch.no_grad()
def exact_distribution(model, prompt: list[int], length: int, params: SamplingParams) -> np.ndarray:
    """P(continuation) for all ``V**length`` continuations, by full (no-cache) forwards of every prefix.

    Returns a flat array indexed by the continuation read as a base-V number (first token most
    significant)."""
    v = model.config.vocab_size
    seqs = [prompt + list(c) for c in itertools.product(range(v), repeat=length - 1)]  # [V^(L-1)]
    logits = model(input_ids=torch.tensor(seqs)).logits[:, len(prompt) - 1:]  # [N, L, V]
    n = logits.shape[0] * length
    warp = row_params([params.temperature] * n, [params.top_k] * n, [params.top_p] * n, "cpu")
    probs = warp_probs(logits.reshape(n, v), *warp).double().reshape(len(seqs), length, v).numpy()
    total = np.zeros(v ** length)
    for i, c in enumerate(itertools.product(range(v), repeat=length - 1)):
        prefix_p = np.prod([probs[i, j, c[j]] for j in range(length - 1)]) if length > 1 else 1.0
        base = cell_index(list(c), v) * v
        # the last token's distribution only depends on c; rows sharing the prefix agree
        total[base:base + v] = prefix_p * probs[i, length - 1]
    assert abs(total.sum() - 1.0) < 1e-5  # float32 rounding
    return total / total.sum()


def cell_index(tokens: list[int], v: int) -> int:
    return sum(t * v ** (len(tokens) - 1 - j) for j, t in enumerate(tokens))


def chi_square(counts: np.ndarray, probs: np.ndarray, min_expected: float = 5.0) -> tuple[float, int]:
    """Pearson statistic and degrees of freedom, pooling cells with expected count < ``min_expected``.

    A sample in a cell of exact probability 0 makes the statistic infinite (the sampler is wrong)."""
    n = counts.sum()
    expected = probs * n
    if counts[probs == 0].sum() > 0:
        return float("inf"), 1
    big = expected >= min_expected
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    keep = exp > 0
    obs, exp = obs[keep], exp[keep]
    return float(((obs - exp) ** 2 / exp).sum()), int(keep.sum() - 1)


def combined_p_value(parts: list[tuple[float, int]]) -> float:
    """p-value of the sum of independent chi-square statistics."""
    stat = sum(s for s, _ in parts)
    dof = sum(d for _, d in parts)
    if not np.isfinite(stat):
        return 0.0
    return 1.0 if dof == 0 else float(sstats.chi2.sf(stat, dof))  # dof 0: one cell, all samples in it
