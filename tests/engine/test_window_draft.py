"""The window drafter: training forward equals the drafting path; greedy speculative = greedy plain."""
import torch

from trajkit.engine import Engine, SamplingParams
from trajkit.engine.drafters.window import WindowDrafter, WindowDraftNet
from trajkit.models.spec import TinySpec, build_model


def test_forward_matches_next_logits_at_every_position():
    torch.manual_seed(0)
    net = WindowDraftNet(vocab_size=16, dim=4, hidden=8, head=3, window=2)
    seq = [5, 1, 7, 2, 9, 3]
    full = net(torch.tensor([seq])).logits[0]  # [L, V]
    for t in range(len(seq)):
        assert torch.allclose(full[t], net.next_logits([seq[:t + 1]])[0], atol=1e-6), t


def test_advance_equals_rebuilding_the_context():
    net = WindowDraftNet(vocab_size=16, dim=4, hidden=8, head=3, window=2)
    seqs = [[1, 2], [1, 2, 3, 4, 5]]
    context, positions = net.contexts(seqs)
    context, positions = net.advance(context, positions, torch.tensor([7, 8]))
    expected, expected_pos = net.contexts([[1, 2, 7], [1, 2, 3, 4, 5, 8]])
    assert torch.equal(context, expected) and torch.equal(positions, expected_pos)


def test_greedy_speculative_with_the_window_drafter_equals_plain():
    target = build_model(TinySpec(vocab_size=16, hidden_size=32, num_layers=2), seed=0, init_scale=5.0)
    torch.manual_seed(1)
    drafter = WindowDrafter(WindowDraftNet(vocab_size=16, dim=4, hidden=8, head=2, window=3))
    prompts = [[1, 2, 3], [4, 5], [6, 7, 8, 9]]
    params = SamplingParams(temperature=0.0, max_new_tokens=10)
    plain = Engine(target).generate(prompts, params)
    spec = Engine(target, drafter=drafter, num_draft_tokens=3).generate(prompts, params)
    assert [c.token_ids for c in spec] == [c.token_ids for c in plain]
    assert spec.stats.proposed > 0 and drafter.calls > 0
