"""The SFT trainer's batches and loss on hand-made export rows (format (b): ``input_ids`` and ``labels``, -100
off the assistant turns): the loss is the mean cross-entropy of exactly the labelled tokens, computed by hand."""
import math

import pytest
import torch

from trajkit.models.spec import TinySpec, build_model
from trajkit.trainers.sft import label_batches, sft_loss

ROWS = [{"input_ids": [10, 11, 12, 13, 14], "labels": [-100, -100, 12, 13, -100]},
        {"input_ids": [20, 21, 22], "labels": [-100, 21, 22]}]


def drawn_rows(ids: torch.Tensor) -> list[dict]:
    """The source row of each batch row (the rows' first ids differ)."""
    return [next(r for r in ROWS if r["input_ids"][0] == ids[b, 0].item()) for b in range(ids.shape[0])]


def test_the_batches_mark_exactly_the_labelled_targets_and_pad_on_the_right():
    ids, mask = next(label_batches(ROWS, 4, seed=0, pad=0))
    assert ids.shape == (4, 5) and mask.shape == (4, 4)
    for b, row in enumerate(drawn_rows(ids)):
        n = len(row["input_ids"])
        assert ids[b].tolist() == row["input_ids"] + [0] * (5 - n)
        assert mask[b].tolist() == [float(lab != -100) for lab in row["labels"][1:]] + [0.0] * (5 - n)


def test_the_loss_is_the_mean_cross_entropy_of_the_labelled_tokens_only():
    model = build_model(TinySpec(vocab_size=259, hidden_size=32), seed=0, init_scale=3.0)
    ids, mask = next(label_batches(ROWS, 3, seed=1, pad=0))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
        loss = sft_loss(model, ids, mask).item()
    # every labelled token of the source rows, scored by the full-logits model at the position before it
    by_hand = [-torch.log_softmax(logits[b, t - 1].double(), -1)[tok].item()
               for b, row in enumerate(drawn_rows(ids))
               for t, (tok, lab) in enumerate(zip(row["input_ids"], row["labels"])) if lab != -100]
    assert len(by_hand) == int(mask.sum()) and loss == pytest.approx(math.fsum(by_hand) / len(by_hand), rel=1e-5)
