"""A window drafter: a small MLP over the sequence's first and last tokens, with no KV cache.

On a CPU, a tiny Hugging Face draft model costs about as much per call as the tiny target it serves
(the per-call framework overhead dominates both), so speculation cannot pay with it. This drafter's
call is one embedding gather and two matrix products:

    q(x_{t+1} | x_{<=t}) = softmax(W2 gelu(W1 [E(head) ; E(window) ; P(t+1)]))

with ``head`` the sequence's first ``head`` tokens (the task prompt's start), ``window`` its last
``window`` tokens and ``P`` a learned position embedding. It is an n-gram-style neural language model
(Bengio et al. 2003) conditioned on the prompt head: blind to the middle of long sequences, which only
lowers acceptance, never exactness (the speculative sampler corrects any q). It implements the engine's
``Drafter`` protocol and is distilled from the policy like a draft model (the RL trainer's draft
refresh); the registry (:mod:`trajkit.engine.drafters.registry`) saves it as ``window.pt`` + ``window.json``.
"""
from __future__ import annotations

import time
from types import SimpleNamespace

import torch
from torch import nn

from trajkit.engine.drafters.base import Proposal, Warp
from trajkit.engine.warp import sample


class WindowDraftNet(nn.Module):
    """``forward(input_ids: [B, L]) -> .logits [B, L, V]`` (position t predicts token t+1)."""

    def __init__(self, vocab_size: int, dim: int = 32, hidden: int = 256, head: int = 8, window: int = 8,
                 max_positions: int = 1024):
        super().__init__()
        self.vocab_size, self.head, self.window, self.max_positions = vocab_size, head, window, max_positions
        self.dim, self.hidden = dim, hidden
        self.embed = nn.Embedding(vocab_size + 1, dim)  # the last id is "nothing here"
        self.position = nn.Embedding(max_positions, dim)
        self.mlp = nn.Sequential(nn.Linear((head + window + 1) * dim, hidden), nn.GELU(),
                                 nn.Linear(hidden, vocab_size))

    def _logits(self, context: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """``context: [..., head + window]`` ids, ``positions: [...]`` -> logits ``[..., V]``."""
        feats = self.embed(context).flatten(-2)
        pos = self.position(positions.clamp(max=self.max_positions - 1))
        return self.mlp(torch.cat([feats, pos], dim=-1))

    def forward(self, input_ids: torch.Tensor, attention_mask=None) -> SimpleNamespace:
        b, length = input_ids.shape
        nothing = self.vocab_size
        padded = torch.cat([input_ids, torch.full((b, 1), nothing, dtype=input_ids.dtype,
                                                  device=input_ids.device)], dim=1)  # index L = nothing
        t = torch.arange(length, device=input_ids.device).unsqueeze(1)  # [L, 1]
        head = torch.arange(self.head, device=input_ids.device).unsqueeze(0).expand(length, -1)
        head = torch.where(head <= t, head, torch.full_like(head, length))  # [L, head]: only seen tokens
        win = t - self.window + 1 + torch.arange(self.window, device=input_ids.device)  # [L, window]
        win = torch.where(win >= 0, win, torch.full_like(win, length))
        index = torch.cat([head, win], dim=1)  # [L, head + window]
        context = padded[:, index]  # [B, L, head + window]
        return SimpleNamespace(logits=self._logits(context, (t.squeeze(1) + 1).expand(b, -1)))

    def contexts(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """(``context: [B, head + window]``, ``positions: [B]``) of the token after each sequence."""
        nothing = self.vocab_size
        rows = []
        for s in seqs:
            head = s[:self.head] + [nothing] * (self.head - min(len(s), self.head))
            win = s[-self.window:]
            rows.append(head + [nothing] * (self.window - len(win)) + win)
        device = self.embed.weight.device
        return (torch.tensor(rows, dtype=torch.long, device=device),
                torch.tensor([len(s) for s in seqs], dtype=torch.long, device=device))

    def next_logits(self, seqs: list[list[int]]) -> torch.Tensor:
        """Logits ``[B, V]`` of the token after each sequence."""
        return self._logits(*self.contexts(seqs))

    def advance(self, context: torch.Tensor, positions: torch.Tensor, tokens: torch.Tensor):
        """The context and positions after appending ``tokens: [B]`` (``positions`` = lengths before)."""
        head, win = context[:, :self.head], context[:, self.head:]
        grow = positions < self.head  # the new token still belongs to the head
        if bool(grow.any()):
            head = head.clone()
            rows = grow.nonzero().squeeze(1)
            head[rows, positions[rows]] = tokens[rows]
        return torch.cat([head, win[:, 1:], tokens.unsqueeze(1)], dim=1), positions + 1


class WindowDrafter:
    """The engine-side :class:`trajkit.engine.Drafter` around a :class:`WindowDraftNet`."""

    def __init__(self, net: WindowDraftNet):
        self.net = net.eval()
        self.calls, self.seconds = 0, 0.0

    def vocab_size(self) -> int | None:
        return self.net.vocab_size

    def begin(self, prompts: list[list[int]]) -> None:
        """Stateless: nothing to prefill."""

    def retain(self, keep: torch.Tensor) -> None:
        """Stateless: nothing to drop."""

    def admit(self, prompts: list[list[int]]) -> None:
        """Stateless: nothing to add."""

    @torch.inference_mode()
    def propose(self, seqs: list[list[int]], k: int, warp: Warp, u: torch.Tensor) -> Proposal:
        start = time.perf_counter()
        context, positions = self.net.contexts(seqs)
        tokens, probs = [], []
        for i in range(k):
            q = warp(self.net._logits(context, positions))  # [B, V]
            d = sample(q, u[:, i])  # [B]
            tokens.append(d)
            probs.append(q)
            if i + 1 < k:
                context, positions = self.net.advance(context, positions, d)
        self.calls += k
        self.seconds += time.perf_counter() - start
        drafts = torch.stack(tokens, dim=1)  # [B, k]
        return Proposal(drafts, torch.stack(probs, dim=1),
                        torch.full((len(seqs),), k, dtype=torch.long, device=drafts.device))
