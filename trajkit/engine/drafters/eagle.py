"""An EAGLE-style draft head: one decoder layer that drafts from the target's own hidden states.

Algorithm (Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty"; Li et
al. 2025, "EAGLE-3: Scaling up Inference Acceleration ... via Training-Time Test"). A separate draft model
sees only tokens; this head sees what the target already computed for them. Its context is one *entry*
per token position ``t``:

    entry_t = proj([g_{t-1} ; E(x_t)])          g_{t-1} = fuse([h^{l_1}_{t-1} ; ... ; h^{l_m}_{t-1}])

with ``h^l_{t-1}`` the target's hidden state after layer ``l`` at the previous token (several layers,
low/mid/high, concatenated: EAGLE-3's multi-layer fusion; ``g_{-1} = 0`` at the first position), ``E`` the
target's own (frozen, shared) token embedding. One decoder layer of the target's own class (a 1-layer
config of the target's, with its own KV cache over the entries) maps the entries to ``ĥ_t``, and the
target's frozen final norm and output layer give the draft distribution of ``x_{t+1}``:
``q_{t+1} = softmax(W_out norm(ĥ_t))``. Drafting ``k`` tokens is autoregression on features: the first
draft comes from the entry of the row's last token (whose ``g`` is a real target feature); draft ``i + 1``
comes from the entry ``(ĥ, E(d_i))``, the head's own output standing in for the feature the target has
not computed yet. After verification the engine hands the head the target's features of the accepted
tokens (:meth:`EagleDrafter.observe`; they come out of the verification forward itself, no extra target
pass), the head drops its speculative entries and the next round starts from real features again.

Training (``trajkit.recipes.smollm2_eagle``) uses :meth:`EagleHead.unroll`: EAGLE-3's *training-time
test*, feeding the head its own predicted features for ``steps`` steps with the attention pattern it will
see when drafting (real entries up to ``t - j``, then its own ``j`` entries), and a soft cross-entropy
against the target's distribution at every step.

Deviations: the fused feature replaces EAGLE-3's separate fc + concat-of-2d attention input (we keep the
target's decoder layer unchanged, so its class and config are reused as they are); drafting is a chain
(one token per position), not EAGLE's dynamic tree, because the engine's verifier checks chains. An
optional *shortlist* of output ids (FR-Spec; :mod:`trajkit.models.shortlist`) computes the output layer
only for those rows: ``q`` is exactly 0 elsewhere and the verifier's residual keeps those tokens' full
target mass, so sampling stays exact (the chi-square suite runs with this drafter).
"""
from __future__ import annotations

import inspect
import json
import time
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

from trajkit.engine.drafters.base import Proposal, Warp, sample_chain
from trajkit.engine.drafters.names import META_FILES
from trajkit.engine.kvstate import KVState, left_pad
from trajkit.errors import ConfigError

NEG = -1.0e4  # logit of tokens outside the shortlist (exp underflows to exactly 0 in float32)
HEAD_FILE, META_FILE = "eagle.pt", META_FILES["eagle"]


class _Shared:
    """The target's embedding, final norm and output layer: held, not owned (not in the head's state_dict,
    kept by a deep copy, never trained by the head: every use detaches them), so the head always reads the
    weights of the target it is bound to (:meth:`EagleHead.bind`), after each weight sync too."""

    def __init__(self, target):
        inner = getattr(target, "model", None)
        if inner is None or not hasattr(inner, "norm") or not hasattr(inner, "layers"):
            raise ConfigError("draft.kind=eagle: the target must be a Hugging Face decoder with .model.layers "
                              "and .model.norm (Llama, Qwen2, ...)")
        self.embed, self.norm, self.out = target.get_input_embeddings(), inner.norm, target.get_output_embeddings()

    def __deepcopy__(self, memo):
        return self

    def normed(self, hidden: torch.Tensor) -> torch.Tensor:
        """The target's final norm of ``hidden`` (gradients reach ``hidden``, never the norm's weights)."""
        weights = {name: p.detach() for name, p in self.norm.named_parameters()}
        return torch.func.functional_call(self.norm, weights, (hidden,))


def default_layers(target) -> tuple[int, ...]:
    """EAGLE-3's low / mid / high features: after layer 2, the middle layer and the last (normed) one
    (fewer, distinct, for a target of fewer than 4 layers)."""
    n = target.config.get_text_config(decoder=True).num_hidden_layers
    return tuple(sorted({min(2, n), max(1, n // 2), n}))


def head_config(target):
    """The target's text config with one decoder layer (the head's layer class reads it)."""
    text = target.config.get_text_config(decoder=True)
    values = text.to_dict()
    values.update(num_hidden_layers=1)
    for key in ("layer_types", "_name_or_path", "architectures", "transformers_version"):
        values.pop(key, None)
    config = type(text)(**values)
    config._attn_implementation = "sdpa"
    return config


class EagleHead(nn.Module):
    """The trainable head over ``target`` (see the module docstring). ``layers``: indices into the
    target's ``hidden_states`` (0 = embeddings, ``n`` = after the last layer and its final norm);
    ``shortlist``: output ids the head may propose (None: the whole vocabulary)."""

    def __init__(self, target, layers: tuple[int, ...], shortlist: list[int] | None = None,
                 init_seed: int = 0, copy_layer: int | None = -1):
        super().__init__()
        text = target.config.get_text_config(decoder=True)
        n = text.num_hidden_layers
        if not layers or any(not 0 <= i <= n for i in layers):
            raise ConfigError(f"eagle: feature layers must be in [0, {n}] (the target's hidden states), got {layers!r}")
        self.shared = _Shared(target)
        self.config = head_config(target)
        self.layers, d = tuple(int(i) for i in layers), text.hidden_size
        self.target_layers = n  # saved, checked when the head is loaded onto a target
        self.full_vocab = int(self.shared.out.weight.shape[0])
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(init_seed)
            self.fuse = nn.Linear(len(self.layers) * d, d, bias=False)  # no bias: g_{-1} = fuse(0) = 0
            self.proj = nn.Linear(2 * d, d, bias=False)
            self.layer = type(target.model.layers[0])(self.config, 0)
            self.rotary = type(target.model.rotary_emb)(self.config)
        if copy_layer is not None:  # start from one of the target's layers (same class, same shapes)
            self.layer.load_state_dict(target.model.layers[copy_layer].state_dict())
        self.layer.to(self.shared.embed.weight.dtype)
        self.fuse.to(self.layer.mlp.down_proj.weight.dtype)
        self.proj.to(self.layer.mlp.down_proj.weight.dtype)
        ids = list(range(self.full_vocab)) if shortlist is None else sorted(int(i) for i in shortlist)
        if len(set(ids)) != len(ids) or min(ids) < 0 or max(ids) >= self.full_vocab:
            raise ConfigError(f"eagle: shortlist ids must be distinct and in [0, {self.full_vocab})")
        self.register_buffer("ids", torch.tensor(ids, dtype=torch.long), persistent=False)
        self.short = shortlist is not None
        self._cache_kw = "cache" if "cache" in inspect.signature(self.layer.forward).parameters else "past_key_values"

    @property
    def feature_width(self) -> int:
        return self.fuse.in_features

    def bind(self, target) -> EagleHead:
        """Draft for ``target`` from now on (its embedding, norm and output layer): e.g. the engine's
        inference copy of a policy, so that each weight sync reaches the head too."""
        width = int(target.get_output_embeddings().weight.shape[0])
        if width != self.full_vocab:
            raise ConfigError(f"eagle: the head has {self.full_vocab} output ids, the target {width}")
        self.shared = _Shared(target)
        return self

    def local_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """``hidden: [..., d]`` -> logits over the shortlist ``[..., K]`` (the target's norm and output rows)."""
        weight = self.shared.out.weight.detach()
        return self.shared.normed(hidden) @ (weight[self.ids] if self.short else weight).T

    def full_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits over the whole vocabulary, ``NEG`` outside the shortlist."""
        local = self.local_logits(hidden)
        if not self.short:
            return local
        full = local.new_full((*local.shape[:-1], self.full_vocab), NEG)
        return full.index_copy_(-1, self.ids, local)

    def entries(self, features: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """``features: [B, T, d]`` (fused ``g_{t-1}``), ``tokens: [B, T]`` -> entries ``[B, T, d]``."""
        return self.proj(torch.cat([features, self.shared.embed(tokens).detach()], dim=-1))

    def run_layer(self, x: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None, cache) -> torch.Tensor:
        cos, sin = self.rotary(x, positions)
        return self.layer(x, attention_mask=mask, position_ids=positions, position_embeddings=(cos, sin),
                          use_cache=True, **{self._cache_kw: cache})

    def forward(self, input_ids: torch.Tensor, features: torch.Tensor, attention_mask=None, position_ids=None,
                cache=None, use_cache=True, logits_to_keep: int = 0, **unused) -> SimpleNamespace:
        """The engine's ``KVState`` call: ``features: [B, T, d]`` fused, ``attention_mask: [B, S]`` the
        cache's slots (None: all real) -> ``.logits [B, T or keep, V]``, ``.hidden_states = (ĥ [B, T, d],)``."""
        b, t = input_ids.shape
        s = cache.get_seq_length() + t
        column = torch.arange(s, device=input_ids.device)
        query = column[s - t:].unsqueeze(1)  # [T, 1]: each new entry's cache column
        allowed = (column.unsqueeze(0) <= query).unsqueeze(0)  # [1, T, S] causal
        if attention_mask is not None:
            allowed = allowed & attention_mask[:, None, :].bool()
        allowed = allowed | (column.unsqueeze(0) == query).unsqueeze(0)  # an entry always sees itself (no NaN)
        hidden = self.run_layer(self.entries(features, input_ids), position_ids, allowed.unsqueeze(1), cache)
        last = hidden[:, -logits_to_keep:] if logits_to_keep else hidden
        return SimpleNamespace(logits=self.full_logits(last), hidden_states=(hidden,))

    def unroll(self, raw: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor,
               steps: int) -> list[torch.Tensor]:
        """Training-time test over whole sequences. ``raw: [B, L, F]`` the target's concatenated features of
        the *previous* token of each entry (zeros at position 0), ``tokens: [B, L]``, ``positions: [B, L]``
        -> ``ĥ`` of each step ``[B, L, d]``. Step ``j``'s entry at ``t`` takes step ``j - 1``'s output at
        ``t - 1`` as its feature and sees real entries up to ``t - j``, then its own steps' entries at
        ``t - j + 1 .. t`` (exactly the drafting pattern: row ``t`` of step ``j`` is draft ``j + 1``)."""
        from transformers import DynamicCache

        b, length, _ = raw.shape
        feats = self.fuse(raw)
        cache = DynamicCache(config=self.config)
        t = torch.arange(length, device=raw.device)
        outs = []
        for j in range(steps):
            blocks = [t.unsqueeze(0) <= (t.unsqueeze(1) - j)]  # block 0 (real entries): s <= t - j
            blocks += [t.unsqueeze(0) == (t.unsqueeze(1) - j + i) for i in range(1, j + 1)]  # step i: t - j + i
            mask = torch.cat(blocks, dim=1)[None, None]  # [1, 1, L, (j+1) L]
            hidden = self.run_layer(self.entries(feats, tokens), positions, mask, cache)
            outs.append(hidden)
            feats = torch.cat([hidden.new_zeros(b, 1, hidden.shape[-1]), hidden[:, :-1]], dim=1)
        return outs

    def save(self, folder: str | Path) -> None:
        """``eagle.pt`` (the head's own weights) + ``eagle.json`` (layers, shortlist); not the shared parts."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(self.state_dict(), folder / HEAD_FILE)
        (folder / META_FILE).write_text(json.dumps({
            "layers": list(self.layers), "shortlist": self.ids.tolist() if self.short else None,
            "vocab_size": self.full_vocab, "hidden_size": self.fuse.out_features,
            "target_layers": self.target_layers}))

    @classmethod
    def load(cls, folder: str | Path, target) -> EagleHead:
        """The head saved in ``folder``, bound to ``target``; ConfigError naming the folder when the head was
        trained on a target of another shape (vocabulary, hidden size, layer count)."""
        folder = Path(folder)
        if not (folder / META_FILE).exists():
            raise ConfigError(f"draft: {folder} holds no EAGLE head ({META_FILE} missing); build one with "
                              "`trajkit models prepare smollm2-135m-instruct-eagle`")
        meta = json.loads((folder / META_FILE).read_text())
        _check_fits(folder, meta, target)
        head = cls(target, tuple(meta["layers"]), meta["shortlist"], copy_layer=None)
        try:
            head.load_state_dict(torch.load(folder / HEAD_FILE, weights_only=True))
        except RuntimeError as e:  # same widths, other layer shapes (heads, MLP): the first mismatch, in one line
            detail = next((line.strip() for line in str(e).splitlines() if "size mismatch" in line), str(e))
            raise ConfigError(f"draft: the EAGLE head in {folder} does not fit the target's decoder layer "
                              f"({detail}); train a head on this target") from None
        return head.eval()


def _check_fits(folder: Path, meta: dict, target) -> None:
    """The saved head's vocabulary, hidden width and feature layers against ``target``'s."""
    text = target.config.get_text_config(decoder=True)
    width, n = int(target.get_output_embeddings().weight.shape[0]), text.num_hidden_layers
    problems = []
    if meta["vocab_size"] != width:
        problems.append(f"a {meta['vocab_size']}-token vocabulary (the target has {width})")
    if meta["hidden_size"] != text.hidden_size:
        problems.append(f"hidden size {meta['hidden_size']} (the target has {text.hidden_size})")
    if meta.get("target_layers", n) != n or max(meta["layers"]) > n:
        trained = meta.get("target_layers", f">= {max(meta['layers'])}")
        problems.append(f"a target of {trained} layers, features after layers {meta['layers']} (the target has {n})")
    if problems:
        raise ConfigError(f"draft: the EAGLE head in {folder} was trained for {'; '.join(problems)}: it does not "
                          "fit this target; pass the head trained on it")


class EagleDrafter:
    """The engine-side :class:`trajkit.engine.Drafter` around an :class:`EagleHead`.

    ``feature_layers`` tells the engine which target hidden states to keep from its forwards; it then calls
    :meth:`observe` with the features of every token it appends to the target's cache (prefill and each
    round's accepted tokens). Per row the drafter keeps the fused features ``g`` of the target's cached
    tokens and how many of the head's cache entries were computed from real features (``real``); a round
    rolls the head back to those, adds the entries of the newly accepted tokens and drafts from there."""

    def __init__(self, head: EagleHead):
        self.head = head.eval()
        self.feature_layers = head.layers
        self.calls, self.seconds = 0, 0.0
        self._before = (0, 0.0)
        self.state: KVState | None = None
        self.feats: list[torch.Tensor] = []  # per row [n_b, d]: fused g of the target's cached tokens
        self.real: list[int] = []  # per row: head entries computed from real features

    def vocab_size(self) -> int | None:
        return self.head.full_vocab

    def _fresh(self, rows: int) -> KVState:
        state = KVState(self.head, capture=(-1,))
        state.prefill([[] for _ in range(rows)], share=False)  # no forward: rows with empty caches
        return state

    def begin(self, prompts: list[list[int]]) -> None:
        self._before = (self.calls, self.seconds)
        self.state = self._fresh(len(prompts))
        d = self.head.fuse.out_features
        self.feats = [self.head.fuse.weight.new_zeros(0, d) for _ in prompts]
        self.real = [0] * len(prompts)
        self._account()

    def admit(self, prompts: list[list[int]]) -> None:
        """Add rows after the active ones (continuous batching); their features come through :meth:`observe`."""
        assert self.state is not None
        self.state.admit(self._fresh(len(prompts)))
        d = self.head.fuse.out_features
        self.feats += [self.head.fuse.weight.new_zeros(0, d) for _ in prompts]
        self.real += [0] * len(prompts)
        self._account()

    @torch.inference_mode()
    def observe(self, features: list[torch.Tensor], rows: list[int] | None = None) -> None:
        """The target's features ``[n_b, F]`` of the tokens it just appended to its cache, for batch
        positions ``rows`` (default: every active row, in order)."""
        start = time.perf_counter()
        rows = list(range(len(self.feats))) if rows is None else rows
        assert len(rows) == len(features)
        sizes = [f.shape[0] for f in features]
        if sum(sizes):
            fused = self.head.fuse(torch.cat(features).to(self.head.fuse.weight.dtype)).split(sizes)
            for r, g in zip(rows, fused):
                self.feats[r] = torch.cat([self.feats[r], g])
        self.seconds += time.perf_counter() - start

    @torch.inference_mode()
    def propose(self, seqs: list[list[int]], k: int, warp: Warp, u: torch.Tensor) -> Proposal:
        assert self.state is not None and len(seqs) == len(self.feats) and u.shape == (len(seqs), k)
        start = time.perf_counter()
        keep = [min(r, len(s) - 1) for r, s in zip(self.real, seqs)]  # at least one entry to run
        self.state.truncate(torch.tensor(keep, dtype=torch.long, device=self.state.device))
        tokens, features, valid = self._pending(seqs, keep)
        logits = self.state.extend(tokens, None if bool(valid.all()) else valid, keep_last=1,
                                   features=features)[:, 0]
        def step(d: torch.Tensor) -> torch.Tensor:  # feature-level autoregression: the head's own last state
            return self.state.extend(d.unsqueeze(1), keep_last=1, features=self.state.features[:, -1:])[:, 0]

        out, probs = sample_chain(logits, k, warp, u, step)  # [B, k], [B, k, V]
        self.real = [len(s) for s in seqs]
        self.seconds += time.perf_counter() - start
        self._account()
        return Proposal(out, probs, torch.full((len(seqs),), k, dtype=torch.long, device=out.device))

    def _pending(self, seqs: list[list[int]], keep: list[int]):
        """Left-padded entries ``keep[b] .. len(seq) - 1`` of every row: (tokens [B, T], fused features
        [B, T, d], valid [B, T]). Entry ``t`` takes the feature of token ``t - 1`` (zero at ``t = 0``)."""
        rows, feats = [], []
        zero = self.head.fuse.weight.new_zeros(1, self.head.fuse.out_features)
        for b, (seq, r) in enumerate(zip(seqs, keep)):
            have = self.feats[b].shape[0]
            if have < len(seq) - 1:
                raise RuntimeError(f"EagleDrafter: row {b} has target features for {have} tokens but its "
                                   f"sequence has {len(seq)}; the engine must pass each forward's features "
                                   "to observe() (use trajkit.engine.Engine)")
            rows.append(seq[r:])
            prev = self.feats[b][max(r - 1, 0):len(seq) - 1]
            feats.append(torch.cat([zero, prev]) if r == 0 else prev)
        tokens, valid = left_pad(rows, 0, self.state.device)
        width = tokens.shape[1]
        padded = zero.new_zeros(len(rows), width, zero.shape[1])
        for b, f in enumerate(feats):
            padded[b, width - f.shape[0]:] = f
        return tokens, padded, valid

    def retain(self, keep: torch.Tensor) -> None:
        self.state.retain(keep)
        index = keep.tolist()
        self.feats = [self.feats[i] for i in index]
        self.real = [self.real[i] for i in index]

    def _account(self) -> None:
        self.calls = self._before[0] + self.state.calls
