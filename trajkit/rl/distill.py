"""On-policy distillation (OPD): the student (the policy) samples, a frozen teacher scores every sampled token,
and the per-token reverse KL between them is the training signal.

The idea is GKD's (Agarwal et al. 2024, "On-policy distillation of language models: learning from
self-generated mistakes") and MiniLLM's reverse KL (Gu et al. 2024); the formulation here is the one of
Thinking Machines' "On-policy distillation" (Lu et al. 2025, tinker-cookbook), which prime-rl's ``opd`` shares.

Formulation. At a sampled completion token ``y_t ~ pi_s(. | x, y_<t)`` the one-sample estimate of the reverse
KL ``KL(pi_s || pi_t)`` at that position is ``k = log pi_s(y_t) - log pi_t(y_t)``. Its negative is the token's
reward, and the token's advantage is (:func:`opd_advantages`)::

    A[b, t] = reward_coef * A_group[b] - coef * (old_logp[b, t] - teacher_logp[b, t])      (0 off the mask)

trained through the configured token loss's clipped surrogate (``grpo``, ``dapo``, ``dr_grpo``), whose
gradient at ratio 1 is ``-A grad log pi_s(y_t)``: in expectation over the student's samples, ``coef`` times
the score-function gradient of each position's reverse KL (no credit to later tokens: tinker-cookbook's
default, a discount of 0). A per-token advantage rather than a separate reverse-KL loss because then the
clip (the trust region), TIS and the decoupled weights for engine/vLLM and asynchronous rollouts, and the KL
to a reference all apply unchanged, and mixing in the task reward is a sum of advantages. The KL term is in
nats per token and not normalised; the group advantage is scaled by ``loss.scale_rewards`` as in RL.

Which student log-prob: ``old_logp``, the policy's own recomputation in the ``logprob`` stage (tinker uses
the sampler's). It comes from the same code path as the teacher's (the same batch, micro-batches, autocast
dtype, float32 log-softmax), so a teacher equal to the student gives every advantage exactly 0, and an
engine/trainer mismatch (vLLM kernels, a stale asynchronous policy) stays out of the distillation signal
(``loss.tis`` / ``loss.decoupled`` correct it as in RL).

Temperature: both log-probs at ``rollout.temperature`` (``log_softmax(logits / T)``, as the policy's). The
samples come from the tempered student and the loss's ratio is of tempered log-probs, so the KL is between
the tempered student and the tempered teacher, minimised at the teacher's logits for every ``T``; an
untempered teacher would leave a non-zero signal at ``T != 1`` even for a student equal to the teacher.

Cost: one forward of the teacher (no gradient) over the step's batch in the ``logprob`` stage, one per
sampled token as a reference model costs (``[B, T]`` log-probs; with a whole-vocabulary ``distill.divergence``
also its ``[N, V]`` log-distributions at the N sampled positions, kept for the update); its weights sit on ``policy.device`` in float32, its forward autocast to ``policy.dtype``.
The teacher must share the student's tokenizer (:func:`tokenizer_difference`): the student's token ids are
scored as they are.
"""
from __future__ import annotations

import os
import time
from dataclasses import replace

import torch

from trajkit.errors import ConfigError
from trajkit.models.load import load_model, load_tokenizer
from trajkit.rl.batching import Batch, batch_logprobs, chunks, token_logprobs_and_dists
from trajkit.rl.divergence import DIVERGENCES, common_support, token_divergence  # noqa: F401 (re-exported)
from trajkit.rl.precision import DTYPES

SPECIAL = ("bos_token", "eos_token", "unk_token")


def opd_advantages(old_logp: torch.Tensor, teacher_logp: torch.Tensor, mask: torch.Tensor,
                   group_advantages: torch.Tensor, coef: float, reward_coef: float = 0.0) -> torch.Tensor:
    """Per-token advantages ``[B, T]``: ``reward_coef * group_advantages[b] - coef * (old_logp - teacher_logp)``
    at the sampled tokens (``mask`` 1), 0 elsewhere; ``old_logp, teacher_logp, mask: [B, T]``,
    ``group_advantages: [B]``. Detached.

    >>> opd_advantages(torch.tensor([[-1.0, -2.0]]), torch.tensor([[-0.5, -2.0]]), torch.tensor([[1.0, 1.0]]),
    ...                torch.tensor([2.0]), coef=1.0, reward_coef=0.5)
    tensor([[1.5000, 1.0000]])
    """
    assert old_logp.shape == teacher_logp.shape == mask.shape and old_logp.dim() == 2, \
        (tuple(old_logp.shape), tuple(teacher_logp.shape), tuple(mask.shape))
    assert group_advantages.shape == old_logp.shape[:1], tuple(group_advantages.shape)
    kl = old_logp.detach() - teacher_logp.detach()
    adv = reward_coef * group_advantages.detach().to(kl.dtype).unsqueeze(1) - coef * kl
    return adv * mask.to(kl.dtype)


def distill_metrics(old_logp: torch.Tensor, teacher_logp: torch.Tensor, mask: torch.Tensor) -> dict:
    """Means over the sampled tokens: ``distill/reverse_kl`` (``old_logp - teacher_logp``, the one-sample
    reverse-KL estimate in nats per token) and ``distill/teacher_logp``."""
    mask = mask.to(old_logp.dtype)
    n = float(mask.sum().clamp(min=1))
    return {"distill/reverse_kl": float(((old_logp - teacher_logp) * mask).sum()) / n,
            "distill/teacher_logp": float((teacher_logp * mask).sum()) / n}


def _specials(tokenizer) -> dict:
    """``{name: (token, id)}`` of bos/eos/unk and every other special token but padding (padded positions are
    never scored, so a different pad token changes nothing)."""
    out = {name: (getattr(tokenizer, name, None), getattr(tokenizer, f"{name}_id", None)) for name in SPECIAL}
    pad = getattr(tokenizer, "pad_token", None)
    for token in getattr(tokenizer, "all_special_tokens", []):
        if token != pad and token not in {v[0] for v in out.values()}:
            out[f"special {token!r}"] = (token, tokenizer.convert_tokens_to_ids(token))
    return out


def _first_line_difference(a: str, b: str) -> str:
    la, lb = a.splitlines(), b.splitlines()
    line = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
    show = lambda xs: repr(xs[line][:60]) if line < len(xs) else "(end)"  # noqa: E731
    return f"first difference at line {line + 1}: policy {show(la)}, teacher {show(lb)}"


def tokenizer_difference(student, teacher) -> str | None:
    """What makes ``teacher``'s tokenizer unable to score ``student``'s token ids, in a few words, or None: the
    vocabulary (token -> id, added tokens included), the special tokens (bos, eos, unk and the rest, with their
    ids; padding aside) and the chat template (the teacher must see the prompts in the format it was trained on).

    >>> from trajkit.models.tokenizer import byte_tokenizer
    >>> tokenizer_difference(byte_tokenizer(), byte_tokenizer()) is None
    True
    """
    vs, vt = student.get_vocab(), teacher.get_vocab()
    if vs != vt:
        moved = sorted(t for t in vs.keys() & vt.keys() if vs[t] != vt[t])
        shown = "".join(f", {t!r} {vs[t]} -> {vt[t]}" for t in moved[:3])
        return (f"vocabulary: {len(vt.keys() - vs.keys())} tokens only in the teacher's, "
                f"{len(vs.keys() - vt.keys())} only in the policy's, {len(moved)} with another id{shown}")
    ss, st = _specials(student), _specials(teacher)
    if ss != st:
        names = [k for k in sorted(ss.keys() | st.keys()) if ss.get(k) != st.get(k)]
        return "special tokens: " + ", ".join(f"{k} policy {ss.get(k)} teacher {st.get(k)}" for k in names[:3])
    cs, ct = getattr(student, "chat_template", None), getattr(teacher, "chat_template", None)
    if cs != ct:
        if cs is None or ct is None:
            return "chat template: only the " + ("teacher" if cs is None else "policy") + " has one"
        return "chat template: " + _first_line_difference(cs, ct)
    return None


def load_teacher(folder: str, tokenizer, device) -> torch.nn.Module:
    """The teacher of ``distill.teacher``: a local Hugging Face causal LM whose tokenizer equals ``tokenizer``
    (the policy's; else a :class:`ConfigError` saying what differs), frozen, in eval mode, float32 on
    ``device``."""
    if not os.path.isdir(folder):
        raise ConfigError(f"distill.teacher: {folder!r} is not a folder; name a local Hugging Face model folder "
                          "(config.json, the weights and the tokenizer files)")
    diff = tokenizer_difference(tokenizer, load_tokenizer(folder, what="distill.teacher"))
    if diff is not None:
        raise ConfigError(f"distill.teacher: its tokenizer differs from the policy's ({diff}); the teacher scores "
                          "the policy's token ids as they are, so both must share one tokenizer: choose a teacher "
                          "of the policy's family, or set policy.path to a student with the teacher's tokenizer")
    teacher = load_model(folder, what="distill.teacher")
    if teacher.config.vocab_size < len(tokenizer):
        raise ConfigError(f"distill.teacher: its vocabulary ({teacher.config.vocab_size}) is smaller than the "
                          f"tokenizer's ({len(tokenizer)})")
    teacher = teacher.to(device=device, dtype=torch.float32).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


@torch.no_grad()
def teacher_scores(teacher, batch: Batch, temperature: float, micro_batch_size: int,
                   dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """The teacher's log-probs of ``batch``'s tokens ``[B, L-1]`` and its log-distributions ``[N, V]`` at the
    batch's N sampled positions (row-major, :attr:`Batch.teacher_dists`), ``micro_batch_size`` rows a forward."""
    b, width = batch.input_ids.shape
    logp = torch.zeros(b, width - 1, device=batch.input_ids.device)
    out, filled = None, 0
    for rows in chunks(b, micro_batch_size):  # consecutive rows: the parts fill [N, V] row-major
        mb = batch.select(rows)
        lp, dists = token_logprobs_and_dists(teacher, mb, temperature, dtype)
        logp[rows, :lp.shape[1]] = lp
        if out is None:  # one [N, V] buffer, filled in place (no second copy at a concatenation)
            out = torch.empty(int((batch.mask > 0).sum()), dists.shape[-1], device=dists.device)
        out[filled:filled + len(dists)] = dists
        filled += len(dists)
    return logp, out


def score_with_teacher(teacher, batch: Batch, old_logp: torch.Tensor, cfg) -> tuple[Batch, dict]:
    """The ``logprob`` stage's distillation part: the teacher's log-probs of ``batch``'s tokens (as the policy's:
    ``rollout.temperature``, ``optim.micro_batch_size`` rows a forward, autocast to ``policy.dtype``) -> (the batch
    with per-token advantages ``[B, L-1]`` from :func:`opd_advantages`, the ``distill/*`` metrics and the
    forward's seconds as ``time/logprob/teacher``). With a whole-vocabulary ``distill.divergence`` the batch
    also carries the teacher's distributions at its sampled positions (:attr:`Batch.teacher_dists`, for the
    update's divergence term) and the advantages only ``reward_coef * A_group``."""
    start = time.perf_counter()
    d = cfg.distill
    dtype = DTYPES[cfg.policy.dtype]
    dists = None
    if d.divergence == "sampled":
        teacher_logp, _ = batch_logprobs(teacher, batch, cfg.rollout.temperature, cfg.optim.micro_batch_size,
                                         dtype=dtype, logits_chunk=cfg.optim.logits_chunk)
    else:
        teacher_logp, dists = teacher_scores(teacher, batch, cfg.rollout.temperature, cfg.optim.micro_batch_size,
                                             dtype)
    seconds = time.perf_counter() - start
    coef = d.coef if dists is None else 0.0  # the divergence is then the update's own loss term
    advantages = opd_advantages(old_logp, teacher_logp, batch.mask, batch.advantages, coef, d.reward_coef)
    metrics = {**distill_metrics(old_logp, teacher_logp, batch.mask), "time/logprob/teacher": seconds}
    return replace(batch, advantages=advantages, teacher_dists=dists), metrics
