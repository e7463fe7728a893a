"""The fit loop's losses: the head-at-the-mask loss against the full-logits loss and a hand computation."""
import math

import pytest
import torch

from trajkit.models.fit import next_token_loss, next_token_loss_at
from trajkit.models.spec import TinySpec, build_model


def test_the_loss_at_the_mask_equals_the_full_logits_loss_and_the_hand_sum():
    model = build_model(TinySpec(vocab_size=259, hidden_size=32), seed=0, init_scale=3.0)
    ids = torch.tensor([[5, 9, 12, 7, 3, 0], [8, 8, 2, 1, 0, 0]])
    mask = torch.tensor([[0, 1, 1, 0, 1], [1, 0, 1, 0, 0]], dtype=torch.float)  # 5 trained targets
    with torch.no_grad():
        logits = model(input_ids=ids).logits  # [2, 6, 259]
        by_hand = [-torch.log_softmax(logits[b, t].double(), -1)[ids[b, t + 1]].item()
                   for b in range(2) for t in range(5) if mask[b, t]]
        at = next_token_loss_at(model, ids, mask).item()
        assert at == pytest.approx(next_token_loss(logits, ids, mask).item(), rel=1e-5)
    assert len(by_hand) == 5 and at == pytest.approx(math.fsum(by_hand) / 5, rel=1e-5)


def test_the_loss_at_the_mask_refuses_a_mask_of_another_shape():
    model = build_model(TinySpec(vocab_size=259, hidden_size=32), seed=0)
    with pytest.raises(AssertionError):
        next_token_loss_at(model, torch.tensor([[1, 2, 3]]), torch.ones(1, 3))  # [B, L] where [B, L-1] is due
