"""Training loops for the shipped tiny pair: next-byte pre-training and draft distillation.

- ``pretrain``: cross-entropy on random windows of the corpus, AdamW, linear warm-up then cosine decay.
- ``distill``: the draft learns the target's full next-token distribution, forward KL(p || q) at
  temperature 1 (Hinton et al. 2015), on a mix of corpus windows and the target's own samples. Training
  on the target's samples is the on-policy data of DistillSpec (Zhou et al. 2023), which raises the
  acceptance rate where it matters: on text the target generates. Deviation: DistillSpec also tries TVD
  and reverse-KL losses; forward KL is the simple, stable choice here.

Everything is seeded (window positions from a ``torch.Generator``, model init by the caller), so with
one thread a run is reproducible on the same machine and library versions.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class Schedule:
    steps: int
    lr: float
    warmup: int
    batch_size: int
    seq_len: int
    weight_decay: float = 0.1
    min_lr_ratio: float = 0.1

    def lr_at(self, step: int) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        progress = (step - self.warmup) / max(1, self.steps - self.warmup)
        return self.lr * (self.min_lr_ratio + (1 - self.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def windows(data: torch.Tensor, batch: int, length: int, gen: torch.Generator) -> torch.Tensor:
    """``data: [N]`` long -> ``[batch, length]`` random windows."""
    starts = torch.randint(0, data.numel() - length, (batch,), generator=gen)
    return torch.stack([data[s:s + length] for s in starts.tolist()])


def _optimizer(model, schedule: Schedule) -> torch.optim.Optimizer:
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": schedule.weight_decay},
                              {"params": other, "weight_decay": 0.0}], lr=schedule.lr, betas=(0.9, 0.95))


def pretrain(model, data: torch.Tensor, schedule: Schedule, seed: int, log=print) -> list[float]:
    """Next-token cross-entropy on ``data: [N]``; returns the loss of every step."""
    gen = torch.Generator().manual_seed(seed)
    opt = _optimizer(model, schedule)
    model.train()
    losses, start = [], time.perf_counter()
    for step in range(schedule.steps):
        batch = windows(data, schedule.batch_size, schedule.seq_len + 1, gen)  # [B, T+1]
        logits = model(input_ids=batch[:, :-1]).logits  # [B, T, V]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        _step(model, opt, loss, schedule.lr_at(step))
        losses.append(loss.item())
        if step % 25 == 0 or step == schedule.steps - 1:
            log(f"  pretrain step {step:4d}/{schedule.steps}  loss {loss.item():.3f}  "
                f"{time.perf_counter() - start:.0f}s")
    model.eval()
    return losses


def distill(student, teacher, sources: list[torch.Tensor], schedule: Schedule, seed: int,
            log=print) -> list[float]:
    """Forward KL(teacher || student) on windows drawn equally from each of ``sources`` (``[N_i]`` long);
    returns the loss of every step."""
    gen = torch.Generator().manual_seed(seed)
    opt = _optimizer(student, schedule)
    student.train()
    teacher.eval()
    losses, start = [], time.perf_counter()
    for step in range(schedule.steps):
        per = -(-schedule.batch_size // len(sources))
        batch = torch.cat([windows(d, per, schedule.seq_len, gen) for d in sources])  # [B, T]
        with torch.no_grad():
            log_p = torch.log_softmax(teacher(input_ids=batch).logits.float(), dim=-1)  # [B, T, V]
        log_q = torch.log_softmax(student(input_ids=batch).logits.float(), dim=-1)
        loss = (log_p.exp() * (log_p - log_q)).sum(-1).mean()
        _step(student, opt, loss, schedule.lr_at(step))
        losses.append(loss.item())
        if step % 25 == 0 or step == schedule.steps - 1:
            log(f"  distill  step {step:4d}/{schedule.steps}  KL {loss.item():.3f}  "
                f"{time.perf_counter() - start:.0f}s")
    student.eval()
    return losses


def _step(model, opt: torch.optim.Optimizer, loss: torch.Tensor, lr: float) -> None:
    for group in opt.param_groups:
        group["lr"] = lr
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


@torch.no_grad()
def mean_loss(model, data: torch.Tensor, seq_len: int, max_windows: int = 16) -> float:
    """Average next-token cross-entropy (nats) over consecutive windows of ``data``."""
    n = min(max_windows, (data.numel() - 1) // (seq_len + 1))
    batch = data[:n * (seq_len + 1)].view(n, seq_len + 1)
    logits = model(input_ids=batch[:, :-1]).logits
    return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), batch[:, 1:].reshape(-1)))
