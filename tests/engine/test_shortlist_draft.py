"""A draft over a shortlist of the vocabulary (trajkit.models.shortlist) keeps speculative sampling exact:
tokens outside the shortlist get draft probability 0 and are still sampled with their target mass."""
import numpy as np
import pytest
import torch

from tests.engine.helpers import (
    cell_index,
    chi_square,
    combined_p_value,
    exact_distribution,
    target_model,
)
from tests.engine.test_distribution import PASS_P, PROMPTS
from trajkit.engine import DraftModel, Engine, SamplingParams
from trajkit.engine.drafters.registry import DRAFT_KINDS
from trajkit.models.shortlist import NEG, ShortlistLM
from trajkit.models.spec import TinySpec, build_model


@pytest.fixture
def tiny_rl_config(tmp_path):
    from tests.rl.conftest import TINY
    from trajkit.rl.config import load_config

    return lambda *o: load_config(None, [*TINY, f"log.out_dir={tmp_path / 'run'}", *o])


IDS = [0, 1, 2, 3, 4, 5, 7, 9]  # 6, 8, 10 and 11 are outside the shortlist


def shortlist_draft(seed=3):
    inner = build_model(TinySpec(vocab_size=len(IDS) + 1, hidden_size=16, num_layers=1, num_heads=2,
                                 num_kv_heads=1, intermediate_size=32), seed, init_scale=15.0)
    return ShortlistLM(inner, IDS, 12)


def test_logits_outside_the_shortlist_are_never_proposed(tmp_path):
    draft = shortlist_draft()
    x = torch.tensor([[1, 6, 11, 4]])
    full = draft(input_ids=x).logits
    assert full.shape == (1, 4, 12)
    outside = [i for i in range(12) if i not in IDS]
    assert torch.all(full[..., outside] == NEG)
    assert torch.equal(full[..., IDS], draft.local_logits(x))
    assert torch.softmax(full / 0.7, -1)[..., outside].max() == 0.0  # exactly zero probability
    # unknown inputs share the out-of-shortlist slot
    assert draft.to_local[6] == draft.to_local[11] == len(IDS)
    DRAFT_KINDS["model"].save(draft, tmp_path)
    again = DRAFT_KINDS["model"].load(tmp_path)
    assert isinstance(again, ShortlistLM) and torch.equal(again(input_ids=x).logits, full)
    assert DraftModel(again).vocab_size() == 12


def test_speculative_sampling_with_a_shortlist_draft_is_exact():
    target, draft = target_model(seed=0), shortlist_draft()
    params = SamplingParams(temperature=1.0, max_new_tokens=3, seed=5)
    per_prompt = 2000
    prompts = [p for p in PROMPTS for _ in range(per_prompt)]
    out = Engine(target, drafter=DraftModel(draft), num_draft_tokens=2).generate(prompts, params)
    parts, outside = [], 0
    for j, prompt in enumerate(PROMPTS):
        counts = np.zeros(12 ** 3)
        for c in out[j * per_prompt:(j + 1) * per_prompt]:
            counts[cell_index(c.token_ids, 12)] += 1
            outside += sum(t not in IDS for t in c.token_ids)
        parts.append(chi_square(counts, exact_distribution(target, prompt, 3, params)))
    st = out.stats.to_dict()
    assert combined_p_value(parts) > PASS_P, st
    assert 0.05 < st["acceptance_rate"] < 0.95, st
    assert outside > 0  # out-of-shortlist tokens were sampled (from the residual), so the test saw them


def test_a_shortlist_draft_is_distilled_online_in_rl(tmp_path, tiny_rl_config):
    """``draft.kind=model`` with a shortlist draft folder: the trainer loads it, rolls out speculatively and
    distils it on the restricted cross-entropy (finite, and it moves the draft's weights)."""
    from trajkit.models.tokenizer import byte_tokenizer
    from trajkit.rl.trainer import Trainer

    vocab = len(byte_tokenizer())
    ids = list(range(97, 123)) + [256, 257, 258]  # lowercase letters and the specials
    inner = build_model(TinySpec(vocab_size=len(ids) + 1, hidden_size=16, num_layers=1, num_heads=2,
                                 num_kv_heads=1, intermediate_size=32), 0)
    ShortlistLM(inner, ids, vocab).save_pretrained(tmp_path / "draft")
    trainer = Trainer(tiny_rl_config("draft.kind=model", "draft.distill=true", "draft.model.source=path",
                                     f"draft.model.path={tmp_path / 'draft'}", "draft.distill_lr=0.01"), logger=False)
    assert isinstance(trainer.state.side.draft, ShortlistLM)
    before = {k: v.clone() for k, v in trainer.state.side.draft.state_dict().items()}
    m = trainer.step_once().metrics
    assert np.isfinite(m["draft/distill_ce"]) and m["gen/target_calls"] > 0
    assert any(not torch.equal(before[k], v) for k, v in trainer.state.side.draft.state_dict().items())
