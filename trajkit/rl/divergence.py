"""On-policy distillation's whole-vocabulary divergences (``distill.divergence``, :mod:`trajkit.rl.distill`):
pure tensor functions of two log-distributions over the vocabulary, one row per sampled position.

GKD (Agarwal et al. 2024) trains the student on its own samples against the teacher's distribution at every
position with a divergence between the two token distributions; ``reverse_kl`` ``KL(student || teacher)`` is
mode-seeking, ``forward_kl`` ``KL(teacher || student)`` mass-covering. Here both are exact over the vocabulary
(no sampled estimate). The names are the config's; this module imports only torch, so the config can check
them without loading the model code.
"""
from __future__ import annotations

import torch


def token_divergence(kind: str, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """``student, teacher: [N, V]`` log-distributions -> ``[N]``: ``reverse_kl`` ``sum_v p_s(v) (log p_s(v) -
    log p_t(v))``, ``forward_kl`` ``sum_v p_t(v) (log p_t(v) - log p_s(v))``; differentiable in ``student``.

    >>> s, t = torch.log(torch.tensor([[0.5, 0.5]])), torch.log(torch.tensor([[0.25, 0.75]]))
    >>> [round(float(token_divergence(k, s, t)), 4) for k in ("reverse_kl", "forward_kl")]
    [0.1438, 0.1308]
    """
    if kind not in DIVERGENCES:
        raise ValueError(f"no whole-vocabulary divergence {kind!r} ({', '.join(DIVERGENCES)})")
    return DIVERGENCES[kind](student, teacher)


def _kl(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """``sum_v p(v) (log p(v) - log q(v))`` over the last dimension; a token ``p`` gives no mass adds 0 (also
    where a logit is ``-inf``: no ``0 * inf`` NaN, in the value or the gradient)."""
    p = logp.exp()
    return (p * torch.where(p > 0, logp - logq, torch.zeros_like(p))).sum(-1)


# ``distill.divergence`` -> (student, teacher log-distributions [N, V]) -> [N]; "sampled" is the advantage path
DIVERGENCES = {"reverse_kl": lambda student, teacher: _kl(student, teacher),
               "forward_kl": lambda student, teacher: _kl(teacher, student)}


def common_support(student: torch.Tensor, teacher: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two log-distributions ``[N, V_s]``, ``[N, V_t]`` over the first ``min(V_s, V_t)`` ids, each renormalised
    there: models of one tokenizer whose output layers are padded to different sizes (the extra rows are no
    token of the tokenizer, which :func:`trajkit.rl.distill.load_teacher` checks both cover). Equal sizes: returned as they are.

    >>> s, t = common_support(torch.log(torch.tensor([[0.5, 0.5]])), torch.log(torch.tensor([[0.25, 0.25, 0.5]])))
    >>> t.exp().tolist()
    [[0.5, 0.5]]
    """
    v = min(student.shape[-1], teacher.shape[-1])
    if student.shape[-1] == teacher.shape[-1]:
        return student, teacher
    cut = lambda x: x[..., :v] - torch.logsumexp(x[..., :v], dim=-1, keepdim=True)  # noqa: E731
    return cut(student), cut(teacher)
