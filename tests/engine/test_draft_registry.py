"""The registry of draft kinds: every kind with weights saves and loads to the same weights; the drafter
each kind builds is what the engine accepts; unknown names are errors that list the kinds."""
import pytest
import torch

from trajkit.engine import Engine, SamplingParams
from trajkit.engine.drafters import DRAFT_KINDS, KIND_NAMES, DraftShape, draft_kind
from trajkit.engine.drafters.base import Drafter
from trajkit.errors import ConfigError
from trajkit.models.spec import TinySpec, build_model

SHAPE = DraftShape(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, head=2, window=3)


@pytest.mark.parametrize("name", ["model", "window"])
def test_save_load_round_trip(name, tmp_path):
    kind = draft_kind(name)
    net = kind.build(16, SHAPE)
    kind.save(net, tmp_path / name)
    loaded = kind.load(tmp_path / name)
    a, b = net.state_dict(), loaded.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_every_kind_drives_the_engine_exactly_in_greedy_mode():
    target = build_model(TinySpec(vocab_size=16, hidden_size=32, num_layers=2), seed=0, init_scale=5.0)
    prompts, params = [[1, 2, 3, 1, 2], [4, 5]], SamplingParams(temperature=0.0, max_new_tokens=8)
    plain = [c.token_ids for c in Engine(target).generate(prompts, params)]
    for name, kind in DRAFT_KINDS.items():
        drafter = kind.drafter(kind.build(16, SHAPE, target=target))  # eagle drafts from the target's features
        assert isinstance(drafter, Drafter) and kind.trainable == (name != "ngram")
        spec = Engine(target, drafter=drafter, num_draft_tokens=2).generate(prompts, params)
        assert [c.token_ids for c in spec] == plain, name


def test_none_and_unknown_kinds():
    assert draft_kind("none") is None and KIND_NAMES[0] == "none"
    # the parsers' plain list of names (trajkit.engine.drafters.names) is exactly the registry's kinds
    assert KIND_NAMES == ("none", *DRAFT_KINDS)
    with pytest.raises(ConfigError, match=r"one of \['none', 'model', 'window', 'ngram', 'eagle'\], got 'medusa'"):
        draft_kind("medusa")
    with pytest.raises(ConfigError, match="build it with the target"):
        draft_kind("eagle").build(16, SHAPE)
