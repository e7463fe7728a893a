"""The exact prefix cache (trajkit.engine.prefix) and prompt sharing within a batch.

References: a full no-cache forward of the whole sequence (logits), and the same engine with the cache
off (tokens, log-probs) — never the cache's own intermediates."""
import pytest
import torch
from transformers import MistralConfig, MistralForCausalLM

from trajkit.engine import DraftModel, Engine, EngineConfig, SamplingParams
from trajkit.engine.kvstate import KVState
from trajkit.engine.prefix import PrefixCache
from trajkit.errors import ConfigError
from trajkit.models.spec import TinySpec

from .helpers import perturbed_copy, target_model

SPEC = TinySpec(vocab_size=40, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2,
                intermediate_size=64, max_positions=512)
BLOCK = 4


def _engine(model, cache_tokens: int = 4096, drafter=None, share: bool = True) -> Engine:
    config = EngineConfig(prefix_cache_tokens=cache_tokens, prefix_block_tokens=BLOCK, share_prompts=share)
    return Engine(model, drafter=drafter, config=config)


def _ids(seed: int, n: int) -> list[int]:
    return torch.randint(1, SPEC.vocab_size, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@torch.no_grad()
def test_logits_after_a_hit_equal_a_no_cache_forward():
    model = target_model(SPEC, seed=3)
    engine = _engine(model)
    first = [_ids(0, 23), _ids(1, 9)]
    out = engine.generate(first, SamplingParams(temperature=0.0, max_new_tokens=6))
    # row 0 continues its own call (prompt + completion + new ids); row 1 shares only part of a prompt
    rows = [first[0] + out[0].token_ids + _ids(2, 7), first[1][:8] + _ids(3, 5)]
    hits = [engine.prefix_cache.lookup(r, len(r) - 1) for r in rows]
    assert [n for n, _ in hits] == [(23 + 6 - 1) // BLOCK * BLOCK, 8]  # full blocks of what was cached
    state = KVState(model)
    rests = [r[n:] for r, (n, _) in zip(rows, hits)]
    logits = state.resume([s for _, s in hits], rests, keep_last=max(map(len, rests)))
    for b, (row, rest) in enumerate(zip(rows, rests)):
        full = model(input_ids=torch.tensor([row])).logits[0, -len(rest):]  # [T, V]
        assert (logits[b, -len(rest):] - full).abs().max() < 1e-5
    # the rows then decode on from the resumed cache like a fresh prefill would
    step = state.extend(torch.tensor([[5], [7]]))[:, 0]
    for b, (row, tok) in enumerate(zip(rows, (5, 7))):
        full = model(input_ids=torch.tensor([row + [tok]])).logits[0, -1]
        assert (step[b] - full).abs().max() < 1e-5


def _session_turns(engine: Engine, mode: str, turns: int = 4):
    """A two-conversation, ``turns``-call agent session: each call re-sends its whole history."""
    params = SamplingParams(temperature=0.0, max_new_tokens=5)
    histories, outs, stats = [_ids(10, 30), _ids(11, 17)], [], []
    for turn in range(turns):
        if mode.endswith("session"):
            session = engine.session()
            session.admit(histories, [params] * len(histories))
            done = {}
            while session.rows:
                done.update({u.row: u.done for u in session.step() if u.done is not None})
            got = [done[r] for r in sorted(done)]
            stats.append(session.last_admit)
        else:
            result = engine.generate(histories, params)
            got = list(result)
            stats.append(result.stats)
        outs.append([(c.token_ids, c.logprobs) for c in got])
        histories = [h + c.token_ids + _ids(100 + 10 * turn + i, 6) for i, (h, c) in enumerate(zip(histories, got))]
    return outs, stats


@pytest.mark.parametrize("mode", ["generate", "session", "speculative", "speculative-session"])
def test_greedy_multi_turn_outputs_are_the_same_with_the_cache_on_and_off(mode):
    model = target_model(SPEC, seed=5)
    draft = DraftModel(perturbed_copy(model, 0.3, seed=1)) if mode.startswith("speculative") else None
    on, stats = _session_turns(_engine(model, drafter=draft), mode)
    off, stats_off = _session_turns(_engine(model, cache_tokens=0, drafter=draft), mode)
    for turn_on, turn_off in zip(on, off):
        for (ids, lps), (ids_off, lps_off) in zip(turn_on, turn_off):
            assert ids == ids_off
            assert lps == pytest.approx(lps_off, abs=1e-5)
    assert stats[0].prefix_hit_tokens == 0 and all(s.prefix_hit_tokens == 0 for s in stats_off)
    for s in stats[1:]:  # from turn 2 every call hits its previous call's full blocks
        assert s.prefix_hit_tokens >= s.prompt_tokens - 2 * (6 + BLOCK + 1)
        assert s.prefill_tokens == s.prompt_tokens - s.prefix_hit_tokens


def test_a_weight_sync_flushes_the_cache():
    model = target_model(SPEC, seed=7)
    engine = _engine(model)
    prompt = [_ids(20, 25)]
    params = SamplingParams(temperature=0.0, max_new_tokens=4)
    engine.generate(prompt, params)
    assert engine.generate(prompt, params).stats.prefix_hit_tokens == 24  # the same prompt again: a hit
    new = perturbed_copy(model, 0.5, seed=2)
    engine.update_weights(new.state_dict())
    assert engine.prefix_cache.tokens == 0
    after = engine.generate(prompt, params)
    assert after.stats.prefix_hit_tokens == 0  # a hit here would reuse states of the old weights
    fresh = Engine(new).generate(prompt, params)  # the new weights, nothing cached
    assert after[0].token_ids == fresh[0].token_ids


def test_eviction_under_a_small_budget_keeps_outputs_exact():
    model = target_model(SPEC, seed=9)
    budget = 3 * BLOCK
    small = _engine(model, cache_tokens=budget)
    on, _ = _session_turns(small, "generate", turns=3)
    off, _ = _session_turns(_engine(model, cache_tokens=0), "generate", turns=3)
    assert [[ids for ids, _ in t] for t in on] == [[ids for ids, _ in t] for t in off]
    counters = small.prefix_cache.counters
    assert counters.evictions > 0 and small.prefix_cache.tokens <= budget
    assert counters.hit_tokens > 0


def _fake_states(cache: PrefixCache, n: int) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32).view(1, 1, 1, n, 1).expand(
        cache.layers, 2, cache.kv_heads, n, cache.head_dim).clone()


def test_lru_evicts_the_least_recent_chain_from_its_tail():
    model = target_model(SPEC, seed=0)
    cache = PrefixCache(model, budget_tokens=6 * BLOCK, block_tokens=BLOCK)
    a, b = list(range(1, 13)), list(range(20, 32))  # three blocks each
    cache.insert(a, lambda s, e: _fake_states(cache, e - s))
    cache.insert(b, lambda s, e: _fake_states(cache, e - s))
    cache.match(a)  # a is the live session now
    cache.insert(list(range(33, 37)), lambda s, e: _fake_states(cache, e - s))  # a seventh block: one must go
    assert len(cache.match(a)) == 3 and len(cache.match(b)) == 2  # b lost its tail block, not its head
    assert cache.counters.evictions == 1 and cache.tokens == 6 * BLOCK
    assert cache.bytes == 6 * BLOCK * 2 * SPEC.num_layers * SPEC.num_kv_heads * (SPEC.hidden_size // SPEC.num_heads) * 4
    # a hit is verified token for token: one id changed inside the second block stops the chain there
    edited = a[:5] + [39] + a[6:]
    assert len(cache.match(edited)) == 1


@pytest.mark.parametrize("drafted", [False, True])
def test_a_group_samples_what_it_samples_without_sharing(drafted):
    model = target_model(SPEC, seed=11)
    prompts = [_ids(30, 19)] * 4 + [_ids(31, 11)] * 4  # two GRPO groups of G = 4
    params = SamplingParams(temperature=1.0, max_new_tokens=8, seed=123)

    def run(share: bool):
        draft = DraftModel(perturbed_copy(model, 0.3, seed=4)) if drafted else None
        return _engine(model, cache_tokens=0, drafter=draft, share=share).generate(prompts, params)

    shared, alone = run(True), run(False)
    for got, ref in zip(shared, alone):
        assert got.token_ids == ref.token_ids
        assert got.logprobs == pytest.approx(ref.logprobs, abs=1e-5)
    prefilled = 18 + 10 if drafted else 19 + 11  # the speculative prefill leaves the last prompt token out
    assert shared.stats.prefill_tokens == prefilled and shared.stats.shared_prompt_tokens == 3 * prefilled
    assert alone.stats.shared_prompt_tokens == 0
    assert len({tuple(c.token_ids) for c in shared[:4]}) > 1  # the group's rows really differ


def test_models_whose_cache_cannot_be_cropped_are_refused():
    config = MistralConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, sliding_window=8,
                           max_position_embeddings=64)
    with pytest.raises(ConfigError, match="sliding-window.*--no-prefix-cache"):
        _engine(MistralForCausalLM(config))
