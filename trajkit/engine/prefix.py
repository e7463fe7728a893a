"""``PrefixCache``: exact reuse of the KV states of token prefixes the engine has already computed.

An agent harness re-sends its whole history on every call, and a GRPO group repeats one prompt G times;
prefilling those tokens again computes states the engine had a moment ago. The cache keeps them
(SGLang's RadixAttention, Zheng et al. 2024; vLLM's automatic prefix caching, which hashes fixed blocks):

- **Blocks in a tree.** A sequence is cut into blocks of ``block_tokens`` ids from position 0. Each block
  is a child of the block before it, keyed by its own ids (a dict keyed by the id tuple: the hash only
  buckets, the lookup compares every id), so a hit is a chain of blocks whose ids equal the prompt's, token
  for token, and whose positions are the same (a block's K/V carry RoPE at their absolute positions).
  A block holds ``kv: [L, 2, H, block_tokens, D]`` (layers, key/value, KV heads, slots, head dim).
- **Exact by construction.** A causal LM's K/V at position ``i`` depend only on tokens ``0..i`` and the
  weights, so the cached states are the ones a fresh prefill would compute (up to the float rounding of a
  different batch shape: tested against a no-cache forward at fp32 to 1e-5). The cache is bound to one
  *namespace* (model, dtype, weights version, tokenizer/template fingerprint); binding another, and every
  weight sync, empties it.
- **What goes in.** When a row finishes, its cached tokens (prompt and completion, all but the last sampled
  token, which was never fed) are inserted, full blocks only; blocks already present are touched, not copied.
- **Budget and eviction.** At most ``budget_tokens`` tokens (``bytes_per_token`` = 2 · layers · KV heads ·
  head dim · dtype bytes). Past it, the least recently used *leaf* block goes first: a chain loses its tail
  before its head, and a lookup touches a whole chain, so the live sessions (used last) keep theirs longest.
- **Only croppable caches.** A sliding window or a recurrent state cannot be resumed from a prefix of
  stored states; such a model is refused (:func:`trajkit.engine.cache.new_cache`'s check).

The batching side (which rows hit, the prefill of the rest) is :func:`trajkit.engine.kvstate.KVState.load`
and :func:`prefill_rows`.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import torch

from trajkit.engine.cache import new_cache
from trajkit.engine.kvstate import unique_rows
from trajkit.errors import ConfigError


@dataclass(eq=False)
class Block:
    """``block_tokens`` ids and their states ``kv: [L, 2, H, block_tokens, D]``; ``used``: last touch."""

    tokens: tuple[int, ...]
    parent: Block | None
    kv: torch.Tensor
    used: int = 0
    children: dict[tuple[int, ...], Block] = field(default_factory=dict)


@dataclass
class CacheCounters:
    """Running totals since the cache was made (flushes do not reset them; ``trajkit serve``'s /metrics)."""

    query_tokens: int = 0  # prompt tokens looked up
    hit_tokens: int = 0  # of which served from the cache
    inserted_tokens: int = 0
    evicted_tokens: int = 0
    evictions: int = 0  # blocks evicted
    flushes: int = 0


class PrefixCache:
    """Exact prefix cache over ``model``'s KV states (module docstring). ``budget_tokens >= block_tokens``."""

    def __init__(self, model, budget_tokens: int, block_tokens: int = 16):
        if not isinstance(block_tokens, int) or block_tokens < 1:
            raise ConfigError(f"prefix cache block_tokens must be an integer >= 1, got {block_tokens!r}")
        if not isinstance(budget_tokens, int) or budget_tokens < block_tokens:
            raise ConfigError(f"prefix cache budget must be at least one block ({block_tokens} tokens), got "
                              f"{budget_tokens!r}; use 0 to turn the cache off")
        try:
            new_cache(model)
        except ConfigError as exc:
            raise ConfigError(f"prefix cache: {exc}; turn the prefix cache off for this model "
                              "(EngineConfig(prefix_cache_tokens=0), trajkit serve --no-prefix-cache)") from exc
        text = model.config.get_text_config(decoder=True)
        heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
        head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        dtype = next(model.parameters()).dtype
        self.layers, self.kv_heads, self.head_dim, self.dtype = text.num_hidden_layers, heads, head_dim, dtype
        self.bytes_per_token = 2 * self.layers * heads * head_dim * torch.empty(0, dtype=dtype).element_size()
        self.budget_tokens, self.block_tokens = budget_tokens, block_tokens
        self.model_id = f"{type(model).__name__}:{getattr(model.config, '_name_or_path', '')}:{dtype}"
        self.namespace: tuple = (self.model_id, 0, "")
        self.counters = CacheCounters()
        self._root: dict[tuple[int, ...], Block] = {}
        self._leaves: set[Block] = set()
        self._blocks = 0
        self._tick = 0

    # --- namespace -------------------------------------------------------------------------------
    def bind(self, weights_version: int | None = None, tokenizer: str | None = None) -> None:
        """Set the weights version and/or tokenizer+template fingerprint; a change empties the cache."""
        _, version, tok = self.namespace
        namespace = (self.model_id, version if weights_version is None else weights_version,
                     tok if tokenizer is None else tokenizer)
        if namespace != self.namespace:
            self.flush()
            self.namespace = namespace

    def flush(self) -> None:
        """Forget every block (a weight sync: the states were computed by other weights)."""
        self._root, self._leaves, self._blocks = {}, set(), 0
        self.counters.flushes += 1

    @property
    def tokens(self) -> int:
        return self._blocks * self.block_tokens

    @property
    def bytes(self) -> int:
        return self.tokens * self.bytes_per_token

    # --- lookup and insertion --------------------------------------------------------------------
    def match(self, ids: list[int], limit: int | None = None) -> list[Block]:
        """The longest chain of cached blocks equal to ``ids[:n]`` with ``n <= limit`` (touched)."""
        limit = len(ids) if limit is None else min(limit, len(ids))
        chain, children, b = [], self._root, self.block_tokens
        for start in range(0, limit - b + 1, b):
            block = children.get(tuple(ids[start:start + b]))
            if block is None:
                break
            chain.append(block)
            children = block.children
        self._touch(chain)
        return chain

    def lookup(self, ids: list[int], limit: int) -> tuple[int, torch.Tensor | None]:
        """(hit tokens, their states ``[L, 2, H, hit, D]`` or None); counts the query."""
        chain = self.match(ids, limit)
        self.counters.query_tokens += len(ids)
        self.counters.hit_tokens += len(chain) * self.block_tokens
        if not chain:
            return 0, None
        return len(chain) * self.block_tokens, torch.cat([blk.kv for blk in chain], dim=3)

    def insert(self, ids: list[int], states) -> int:
        """Add the full blocks of ``ids`` not yet cached; ``states(start, end) -> [L, 2, H, end - start, D]``
        gives the states of ``ids[start:end]``. Returns the tokens added."""
        b = self.block_tokens
        chain = self.match(ids)
        start, end = len(chain) * b, (len(ids) // b) * b
        if end <= start:
            return 0
        kv = states(start, end)
        assert kv.shape == (self.layers, 2, self.kv_heads, end - start, self.head_dim), kv.shape
        parent = chain[-1] if chain else None
        for at in range(start, end, b):
            block = Block(tuple(ids[at:at + b]), parent, kv[:, :, :, at - start:at - start + b].clone())
            (parent.children if parent else self._root)[block.tokens] = block
            self._leaves.discard(parent)
            self._leaves.add(block)
            self._blocks += 1
            chain.append(block)
            parent = block
        self._touch(chain)
        self.counters.inserted_tokens += end - start
        self._evict()
        return end - start

    def _touch(self, chain: list[Block]) -> None:
        self._tick += 1
        for block in chain:
            block.used = self._tick

    def resize(self) -> None:
        """Trim to ``budget_tokens`` (after it was lowered)."""
        if self.budget_tokens < self.block_tokens:
            raise ConfigError(f"prefix cache budget must be at least one block ({self.block_tokens} tokens)")
        self._evict()

    def _evict(self) -> None:
        """Drop least recently used leaves until the cache fits its budget."""
        while self.tokens > self.budget_tokens:
            leaf = min(self._leaves, key=lambda blk: blk.used)
            self._leaves.discard(leaf)
            siblings = leaf.parent.children if leaf.parent else self._root
            del siblings[leaf.tokens]
            if leaf.parent is not None and not leaf.parent.children:
                self._leaves.add(leaf.parent)
            self._blocks -= 1
            self.counters.evictions += 1
            self.counters.evicted_tokens += self.block_tokens

    def snapshot(self) -> dict:
        """Counters plus the current size (what ``/metrics`` and the benches print)."""
        c = self.counters
        return {"query_tokens": c.query_tokens, "hit_tokens": c.hit_tokens,
                "hit_rate": c.hit_tokens / c.query_tokens if c.query_tokens else 0.0,
                "inserted_tokens": c.inserted_tokens, "evicted_tokens": c.evicted_tokens,
                "evictions": c.evictions, "flushes": c.flushes, "cached_tokens": self.tokens,
                "cached_bytes": self.bytes, "budget_tokens": self.budget_tokens,
                "bytes_per_token": self.bytes_per_token}


def tokenizer_fingerprint(tokenizer) -> str:
    """A short hash of what maps text to ids: the vocabulary, the special tokens and the chat template."""
    vocab = tokenizer.get_vocab() if callable(getattr(tokenizer, "get_vocab", None)) else {}
    parts = [str(sorted(vocab.items())), str(getattr(tokenizer, "all_special_tokens", "")),
             str(getattr(tokenizer, "chat_template", "") or "")]
    return hashlib.blake2b("\x00".join(parts).encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Reuse:
    """How a prefill reuses work: ``cache`` (a :class:`PrefixCache`, or None) and ``share`` (identical
    prompts of one batch prefilled once, their states copied: a GRPO group shares its prompt)."""

    cache: PrefixCache | None = None
    share: bool = True

    def prefill(self, state, prompts: list[list[int]], keep_last: int, stats
                ) -> tuple[torch.Tensor | None, list[int]]:
        """Prefill ``prompts`` into the empty ``state`` (a :class:`~trajkit.engine.kvstate.KVState`) reusing
        what can be; counts the prompt, hit, shared and computed tokens into ``stats``
        (:class:`~trajkit.engine.types.GenerationStats`). -> (logits as ``KVState.prefill``, each row's
        tokens served by the cache)."""
        unique, inverse = unique_rows(prompts) if self.share else (prompts, None)
        hits = [self.cache.lookup(p, len(p) - (1 if keep_last else 0)) if self.cache else (0, None) for p in unique]
        if any(n for n, _ in hits):
            logits = state.resume([s for _, s in hits], [p[n:] for p, (n, _) in zip(unique, hits)],
                                  keep_last=keep_last)
        else:
            logits = state.prefill(unique, keep_last=keep_last, share=False)
        hit = sum(n for n, _ in hits)
        stats.prompt_tokens += sum(map(len, prompts))
        stats.prefix_hit_tokens += hit
        stats.prefill_tokens += sum(map(len, unique)) - hit
        stats.shared_prompt_tokens += sum(map(len, prompts)) - sum(map(len, unique))
        row_hits = [hits[i][0] for i in inverse] if inverse is not None else [n for n, _ in hits]
        return state.expand(inverse, logits), row_hits

    def attach(self, batch, state_of) -> None:
        """Insert each row into the cache as it finishes (``batch.on_finish``); ``state_of()``: the
        target's ``KVState`` holding the batch's rows at that moment."""
        if self.cache is None:
            return
        cache = self.cache

        def finished(positions: list[int]) -> None:
            state = state_of()
            if state.width == 0:
                return
            lengths = state.lengths.tolist()
            for pos in positions:
                ids = batch.seqs[batch.rows[pos]][:lengths[pos]]
                cache.insert(ids, lambda start, end, pos=pos: state.row_states(pos, start, end))

        batch.on_finish = finished
