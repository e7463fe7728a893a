"""``trajkit bench long-context``'s scoring against Hugging Face's own loss (``model(ids, labels=...).loss``,
the mean cross-entropy over labels != -100) on a tiny model with an 32-position window, and its example
picking on the real export of the bundled sample."""
import torch

from trajkit.bench.long_context import Tally, long_examples, score_example
from trajkit.models.rope import RopeScaling, rescaled
from trajkit.models.spec import TinySpec, build_model

W = 32


def _hf_loss(model, ids, labels) -> float:
    with torch.no_grad():
        return float(model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels])).loss)


def test_scores_equal_hf_losses_over_the_same_tokens():
    model = build_model(TinySpec(vocab_size=50, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1,
                                 intermediate_size=64, max_positions=W), seed=0, init_scale=5.0)
    yarn = rescaled(model, RopeScaling(type="yarn", factor=2.0))
    ids = torch.randint(0, 50, (60,), generator=torch.Generator().manual_seed(0)).tolist()
    labels = [-100] * 10 + ids[10:40] + [-100] * 5 + ids[45:]
    head = [x if i < W else -100 for i, x in enumerate(labels)]
    tail = [x if i >= W else -100 for i, x in enumerate(labels)]
    row = score_example({"rope": model, "yarn x2": yarn}, {"source": "s", "conversation": 0, "input_ids": ids,
                                                           "labels": labels}, W, 7, Tally())
    assert (row["head_tokens"], row["tail_tokens"]) == (W - 10, 8 + 15)
    loss = row["loss"]
    assert abs(loss["truncate"]["head"] - _hf_loss(model, ids[:W], labels[:W])) < 1e-5
    assert loss["truncate"]["tail"] is None
    assert abs(loss["rope"]["tail"] - _hf_loss(model, ids, tail)) < 1e-5
    assert abs(loss["yarn x2"]["head"] - _hf_loss(yarn, ids, head)) < 1e-5
    assert abs(loss["yarn x2"]["tail"] - _hf_loss(yarn, ids, tail)) < 1e-5
    start = len(ids) - W
    assert abs(loss["truncate+window"]["tail"] - _hf_loss(model, ids[start:], tail[start:])) < 1e-5
    assert abs(loss["yarn x2"]["tail"] - loss["rope"]["tail"]) > 1e-4  # the scaling changed the tail


def test_long_examples_alternate_sources_longest_first(smollm2_tokenizer_folder):
    picked = long_examples(smollm2_tokenizer_folder, 9000, 4, 65536)
    assert [p["source"] for p in picked] == ["kimi", "glm-5.1", "kimi", "glm-5.1"]
    assert all(len(p["input_ids"]) > 9000 and len(p["labels"]) == len(p["input_ids"]) for p in picked)
    assert len(picked[0]["input_ids"]) >= len(picked[2]["input_ids"])
    assert len(picked[1]["input_ids"]) >= len(picked[3]["input_ids"])
