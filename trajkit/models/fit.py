"""trajkit's one supervised training loop and its losses, used by every recipe (tiny pre-training,
draft distillation, RL warm starts) and by the RL trainer's online draft refresh.

- :func:`fit`: AdamW (decay on matrices only), a :class:`Schedule` (linear warm-up, then cosine decay to
  ``min_lr_ratio``; ``min_lr_ratio=1`` with ``warmup=0`` is a constant rate), gradient clipping, one
  ``loss_fn(batch)`` per step. Returns the loss of every step.
- :func:`soft_cross_entropy`: ``-sum_v p(v) log q(v)`` of a student's tempered distribution ``q`` against a
  detached teacher log-distribution ``log p``, averaged over masked positions. It has the gradient of the
  forward KL(p || q) (Hinton et al. 2015): the two differ by the teacher's entropy, a constant.
- :func:`next_token_loss`: cross-entropy of next tokens, optionally masked (SFT on completion tokens).
- :func:`next_token_loss_at`: the same masked value from the model's hidden states, the output head applied
  at the masked positions only (no ``[B, L, V]`` logits: with long prompts and few trained tokens the head
  over every position would be most of the work). The SFT trainer's loss (:mod:`trajkit.trainers.sft`) and
  the scripted-reply recipe's (:mod:`trajkit.recipes.scripted`); it lives here, below both, because recipes
  sit below the trainers layer.

Everything is seeded by the caller (model init, window positions from a ``torch.Generator``), so with
one thread a run is reproducible on the same machine and library versions.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch
import torch.nn.functional as F


@dataclass
class Schedule:
    """Optimiser settings and the learning-rate curve of one :func:`fit` run."""

    steps: int
    lr: float
    warmup: int = 0
    batch_size: int = 8
    seq_len: int = 256
    weight_decay: float = 0.1
    min_lr_ratio: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0

    def lr_at(self, step: int) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        progress = (step - self.warmup) / max(1, self.steps - self.warmup)
        return self.lr * (self.min_lr_ratio + (1 - self.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def make_adamw(model: torch.nn.Module, schedule: Schedule) -> torch.optim.Optimizer:
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": schedule.weight_decay},
                              {"params": other, "weight_decay": 0.0}], lr=schedule.lr, betas=schedule.betas)


def fit(model: torch.nn.Module, batches: Iterable[Any], loss_fn: Callable[[Any], torch.Tensor],
        schedule: Schedule, *, name: str = "fit", log: Callable[[str], None] | None = None,
        log_every: int = 25) -> list[float]:
    """Train ``model`` for ``schedule.steps`` steps, one batch each; returns every step's loss."""
    opt = make_adamw(model, schedule)
    model.train()
    losses, start = [], time.perf_counter()
    for step, batch in zip(range(schedule.steps), batches):
        for group in opt.param_groups:
            group["lr"] = schedule.lr_at(step)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), schedule.grad_clip)
        opt.step()
        losses.append(loss.item())
        if log is not None and (step % log_every == 0 or step == schedule.steps - 1):
            log(f"  {name:8s} step {step:4d}/{schedule.steps}  loss {losses[-1]:.3f}  "
                f"{time.perf_counter() - start:.0f}s")
    model.eval()
    return losses


def soft_cross_entropy(student_logits: torch.Tensor, teacher_logp: torch.Tensor,
                       mask: torch.Tensor | None = None, temperature: float = 1.0) -> torch.Tensor:
    """``student_logits, teacher_logp: [B, T, V]``, ``mask: [B, T]`` (None = all) -> scalar mean over
    masked positions of ``-sum_v p log softmax(student / temperature)``."""
    assert student_logits.shape == teacher_logp.shape, (student_logits.shape, teacher_logp.shape)
    log_q = torch.log_softmax(student_logits.float() / temperature, dim=-1)
    ce = -(teacher_logp.exp() * log_q).sum(-1)  # [B, T]
    if mask is None:
        return ce.mean()
    assert mask.shape == ce.shape, (mask.shape, ce.shape)
    return (ce * mask).sum() / mask.sum().clamp(min=1)


def next_token_loss(logits: torch.Tensor, input_ids: torch.Tensor,
                    mask: torch.Tensor | None = None) -> torch.Tensor:
    """``logits: [B, L, V]`` over ``input_ids: [B, L]`` -> mean cross-entropy of tokens ``1..L-1``;
    ``mask: [B, L-1]`` (1 = trained) selects the target positions."""
    flat = logits[:, :-1].reshape(-1, logits.shape[-1]).float()
    nll = F.cross_entropy(flat, input_ids[:, 1:].reshape(-1), reduction="none").view(input_ids.shape[0], -1)
    if mask is None:
        return nll.mean()
    return (nll * mask).sum() / mask.sum().clamp(min=1)


def next_token_loss_at(model, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``ids: [B, L]``, ``mask: [B, L-1]`` (1 where position t's next token ``ids[:, t+1]`` is trained) -> the
    mean next-token cross-entropy over the masked positions, equal to ``next_token_loss(model(ids).logits, ids,
    mask)``; the output head runs on the ``N = mask.sum()`` selected hidden states only (``[N, V]`` logits).
    ``model`` is a Hugging Face causal LM (``base_model``, ``get_output_embeddings``)."""
    hidden = model.base_model(input_ids=ids).last_hidden_state[:, :-1]  # [B, L-1, D]
    assert hidden.shape[:2] == mask.shape, (hidden.shape, mask.shape)
    at = mask.bool()
    logits = model.get_output_embeddings()(hidden[at])  # [N, V]
    return F.cross_entropy(logits.float(), ids[:, 1:][at])


def windows(data: torch.Tensor, batch: int, length: int, gen: torch.Generator) -> torch.Tensor:
    """``data: [N]`` long -> ``[batch, length]`` random windows."""
    starts = torch.randint(0, data.numel() - length, (batch,), generator=gen)
    return torch.stack([data[s:s + length] for s in starts.tolist()])


@torch.no_grad()
def mean_loss(model, data: torch.Tensor, seq_len: int, max_windows: int = 16) -> float:
    """Average next-token cross-entropy (nats) over consecutive windows of ``data``."""
    n = min(max_windows, (data.numel() - 1) // (seq_len + 1))
    batch = data[:n * (seq_len + 1)].view(n, seq_len + 1)
    return float(next_token_loss(model(input_ids=batch).logits, batch))
