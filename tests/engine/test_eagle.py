"""The EAGLE-style head (``draft.kind=eagle``): the target features it drafts from are the target's own hidden
states, taken from the forwards the engine runs anyway (checked against an independent full forward), its
drafts follow its head, and the registry saves and loads it. Exactness of the sampled tokens is in
test_distribution.py (chi-square), test_greedy.py and test_spec_session.py, all parametrized with it."""
from __future__ import annotations

import time

import pytest
import torch

from tests.engine.helpers import target_model, trained_eagle
from trajkit.engine import Engine, EngineConfig, SamplingParams
from trajkit.engine.drafters import draft_kind
from trajkit.engine.drafters.eagle import EagleDrafter, EagleHead, default_layers
from trajkit.errors import ConfigError
from trajkit.models.spec import TinySpec

SPEC = TinySpec(vocab_size=16, hidden_size=32, num_layers=3, num_heads=4, num_kv_heads=2, intermediate_size=64)
PROMPTS = [[3], [1, 2, 3, 4, 5, 6, 7, 8, 9], [5, 5, 6], [9, 8, 9, 8, 9, 8, 2, 11, 4, 7, 9, 8]]
LAYERS = (1, 2, 3)


class Recording(EagleDrafter):
    """An EagleDrafter that also keeps every raw feature it was handed, by the row's admission number."""

    def __init__(self, head):
        super().__init__(head)
        self.log: dict[int, list[torch.Tensor]] = {}
        self.ids: list[int] = []

    def begin(self, prompts):
        super().begin(prompts)
        self.ids = [len(self.log) + i for i in range(len(prompts))]
        self.log.update({i: [] for i in self.ids})

    def admit(self, prompts):
        super().admit(prompts)
        new = [len(self.log) + i for i in range(len(prompts))]
        self.ids += new
        self.log.update({i: [] for i in new})

    def observe(self, features, rows=None):
        super().observe(features, rows)
        for r, f in zip(range(len(self.ids)) if rows is None else rows, features):
            self.log[self.ids[r]].append(f.clone())

    def retain(self, keep):
        super().retain(keep)
        self.ids = [self.ids[i] for i in keep.tolist()]

    def seen(self, row: int) -> torch.Tensor:
        return torch.cat(self.log[row])


@torch.no_grad()
def reference_features(model, seq: list[int]) -> torch.Tensor:
    """The hidden states of ``seq`` at ``LAYERS`` from one full forward without a cache: ``[L, F]``."""
    out = model(input_ids=torch.tensor([seq]), output_hidden_states=True)
    return torch.cat([out.hidden_states[i][0] for i in LAYERS], dim=-1)


@pytest.fixture(scope="module")
def target():
    return target_model(SPEC, seed=5)


@pytest.mark.parametrize("k", [1, 3])
def test_features_are_the_target_hidden_states_of_every_cached_token(target, k):
    drafter = Recording(EagleHead(target, LAYERS, init_seed=0))
    engine = Engine(target, drafter, num_draft_tokens=k)
    prompts = PROMPTS + PROMPTS[1:2]  # a repeated prompt is prefilled once and its features copied
    out = engine.generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=20, seed=4))
    assert out.stats.accepted > 0 and out.stats.shared_prompt_tokens > 0
    for row, (prompt, c) in enumerate(zip(prompts, out)):
        seq = prompt + c.token_ids
        seen = drafter.seen(row)
        # every token the target's cache holds (all but the last emitted), each once, in order
        assert seen.shape[0] == len(seq) - 1, row
        torch.testing.assert_close(seen, reference_features(target, seq[:-1]), atol=1e-4, rtol=1e-4)


def test_features_of_rows_joining_a_session(target):
    drafter = Recording(EagleHead(target, LAYERS, init_seed=0))
    session = Engine(target, drafter, num_draft_tokens=2).session()
    params = SamplingParams(temperature=0.0, max_new_tokens=12)
    done = {}
    schedule = {0: PROMPTS[:2], 2: PROMPTS[2:]}
    step = 0
    while step in schedule or session.rows:
        if step in schedule:
            session.admit(schedule[step], [params] * len(schedule[step]))
        for update in session.step():
            if update.done is not None:
                done[update.row] = update.done.token_ids
        step += 1
    for row, prompt in enumerate(PROMPTS):
        seq = prompt + done[row]
        torch.testing.assert_close(drafter.seen(row), reference_features(target, seq[:-1]), atol=1e-4, rtol=1e-4)


def test_prefix_cache_hits_give_zero_features_and_the_rest_are_exact(target):
    drafter = Recording(EagleHead(target, LAYERS, init_seed=0))
    engine = Engine(target, drafter, num_draft_tokens=2, config=EngineConfig(prefix_cache_tokens=256,
                                                                             prefix_block_tokens=4))
    prompt = PROMPTS[3]
    params = SamplingParams(temperature=0.0, max_new_tokens=6)
    first = engine.generate([prompt], params)[0]
    again = prompt + first.token_ids[:3]  # its first 12 tokens hit the cache (3 blocks of 4)
    second = engine.generate([again], params)[0]
    assert second.cached_tokens == 12
    seen, ref = drafter.seen(1), reference_features(target, (again + second.token_ids)[:-1])
    assert seen.shape == ref.shape and not seen[:12].any()
    torch.testing.assert_close(seen[12:], ref[12:], atol=1e-4, rtol=1e-4)


def test_drafts_follow_the_head():
    """Greedy drafts equal the head's own argmax chain computed by hand from the real features: entry
    ``t = (g_{t-1}, E(x_t))``, then the head's output as the next entry's feature."""
    model = target_model(SPEC, seed=6, dtype=torch.float64)
    head = EagleHead(model, LAYERS, init_seed=3).double()
    drafter = EagleDrafter(head)
    prompt = [1, 2, 3, 4, 5]
    drafter.begin([prompt])
    feats = reference_features(model, prompt[:-1]).double()
    drafter.observe([feats])
    argmax = lambda logits: torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).double()
    u = torch.zeros(1, 3, dtype=torch.float64)
    got = drafter.propose([prompt], 3, argmax, u).tokens[0].tolist()
    with torch.no_grad():  # by hand: the whole context in one no-cache pass per draft
        g = torch.cat([torch.zeros(1, head.fuse.out_features, dtype=torch.float64), head.fuse(feats)])
        tokens, want = list(prompt), []
        for _ in range(3):
            x = head.entries(g.unsqueeze(0), torch.tensor([tokens]))
            n = len(tokens)
            mask = torch.tril(torch.ones(n, n, dtype=torch.bool))[None, None]
            hidden = head.run_layer(x, torch.arange(n).unsqueeze(0), mask, None)[0]
            want.append(int(head.full_logits(hidden[-1]).argmax()))
            tokens.append(want[-1])
            g = torch.cat([g, hidden[-1:]])
    assert got == want


def test_training_raises_alpha_and_the_head_round_trips(tmp_path, target):
    head = trained_eagle(target, LAYERS, steps=40)
    fresh = EagleHead(target, LAYERS, init_seed=0)
    prompts = [[1, 2, 3], [4, 5]] * 8
    params = SamplingParams(temperature=1.0, max_new_tokens=16, seed=1)
    alpha = {name: Engine(target, EagleDrafter(h), num_draft_tokens=3).generate(prompts, params).stats.alpha
             for name, h in (("fresh", fresh), ("trained", head))}
    assert alpha["trained"] > alpha["fresh"] + 0.1, alpha
    kind = draft_kind("eagle")
    kind.save(head, tmp_path / "eagle")
    loaded = kind.load(tmp_path / "eagle", target=target)
    a, b = head.state_dict(), loaded.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
    with pytest.raises(ConfigError, match="needs the target"):
        kind.load(tmp_path / "eagle")
    with pytest.raises(ConfigError, match="holds no EAGLE head"):
        kind.load(tmp_path, target=target)


def test_default_layers_and_bad_layers(target):
    assert default_layers(target) == (1, 2, 3)
    with pytest.raises(ConfigError, match=r"feature layers must be in \[0, 3\]"):
        EagleHead(target, (1, 4))


class Slow(EagleDrafter):
    """An EAGLE drafter that spends 0.2 s per proposal: speculation with it is far slower than plain."""

    def propose(self, seqs, k, warp, u):
        time.sleep(0.2)
        return super().propose(seqs, k, warp, u)


def test_auto_k_turns_a_session_plain_after_one_busy_period_slower_than_plain(target):
    """The guard per session and per batch size: the cost model is told speculation pays (alpha 0.9,
    free drafts); the first busy period at batch 1 comes out slower than plain decoding at batch 1, so the
    next period at batch 1 decodes plainly, while batch 2 (never measured slow) still speculates."""
    from trajkit.engine.choose_k import CostProfile, measure_costs

    engine = Engine(target, Slow(EagleHead(target, LAYERS, init_seed=0)), num_draft_tokens="auto")
    auto = engine.auto_k
    auto.alpha = 0.9
    for batch in (1, 2):
        t1 = measure_costs(target, None, PROMPTS[:batch]).t1
        auto.costs[batch] = CostProfile(batch, t1=t1, c=0.0, v={k: 1.0 for k in range(1, 5)})
    params = SamplingParams(temperature=1.0, max_new_tokens=8, seed=0)
    session = engine.session()
    session.admit(PROMPTS[:1], [params])
    first_k = session.k
    while session.rows:
        session.step()
    assert first_k > 0 and 1 in auto.plain_only and auto.plain_only[1] < 1.0
    session.admit(PROMPTS[1:2], [params])
    assert session.k == 0  # batch 1 is plain from now on
    while session.rows:
        session.step()
    session.admit(PROMPTS[:2], [params, params])
    assert session.k > 0 and 2 not in auto.plain_only
