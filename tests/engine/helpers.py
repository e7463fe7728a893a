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


def trained_eagle(target, layers=(1, 2), steps: int = 60, rows: int = 24, length: int = 24, seed: int = 0,
                  shortlist=None):
    """A lightly trained EAGLE head over ``target``: the offline recipe's training-time-test loss
    (:mod:`trajkit.recipes.smollm2_eagle`) on ``rows`` of the target's own samples at temperature 1."""
    from trajkit.engine import Engine
    from trajkit.engine.drafters.eagle import EagleHead
    from trajkit.models.fit import Schedule, fit
    from trajkit.recipes.smollm2_eagle import EagleRecipe, Windows, target_features, ttt_loss

    v = target.config.vocab_size
    gen = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(v, (int(n),), generator=gen).tolist() for n in torch.randint(1, 6, (rows,), generator=gen)]
    out = Engine(target).generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=length, seed=seed))
    seqs = [p + c.token_ids for p, c in zip(prompts, out)]
    head = EagleHead(target, layers, shortlist, init_seed=seed)
    recipe = EagleRecipe(temperature=1.0, steps=steps, batch_size=8, window=length, lr=3e-3)
    feats = target_features(target, head.layers, seqs, recipe.temperature, log=lambda _: None)
    windows = Windows(seqs, prompts, [(f.to(torch.float32), z) for f, z in feats], list(range(rows)), recipe, seed)

    def batches():
        while True:
            yield tuple(x.to(target.dtype) if torch.is_floating_point(x) else x for x in _flat(windows.batch()))

    fit(head, batches(), lambda b: ttt_loss(head, _unflat(b), recipe), Schedule(steps, recipe.lr, warmup=5))
    return head.eval()


def _flat(batch):
    raw, tokens, positions, (final, logz), mask = batch
    return raw, tokens, positions, final, logz, mask


def _unflat(batch):
    raw, tokens, positions, final, logz, mask = batch
    return raw, tokens, positions, (final, logz), mask
