"""``load_gateway`` (what ``trajkit serve --model DIR --draft DIR`` runs) with a shortlist draft folder: the
draft kind's own loader rebuilds the ``ShortlistLM`` (a plain load would see its 65-logit inner model
and refuse the vocabulary), and the served engine then runs continuous speculative rounds."""
import torch

from trajkit.engine import SamplingParams
from trajkit.engine.session import SpeculativeSession
from trajkit.gateway import GatewayConfig
from trajkit.gateway.server import load_gateway
from trajkit.models.shortlist import ShortlistLM
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer


def test_a_shortlist_draft_folder_serves_speculatively(tmp_path):
    target = build_model(TinySpec(vocab_size=259, hidden_size=32, max_positions=512), seed=0, init_scale=5.0)
    target.save_pretrained(tmp_path / "model")
    byte_tokenizer().save_pretrained(tmp_path / "model")
    ids = list(range(64))
    inner = build_model(TinySpec(vocab_size=len(ids) + 1, hidden_size=16, max_positions=512), seed=1)
    ShortlistLM(inner, ids, 259).save_pretrained(tmp_path / "draft")
    gw = load_gateway(str(tmp_path / "model"), GatewayConfig(model_name="tiny"), draft=str(tmp_path / "draft"),
                      num_draft_tokens=2)
    try:
        assert isinstance(gw.engine.drafter.model, ShortlistLM) and gw.scheduler.continuous
        assert isinstance(gw.engine.session(), SpeculativeSession)
        p = SamplingParams(temperature=0.0, max_new_tokens=12)
        spec = gw.engine.generate([[104, 105]], p)[0]
        with torch.no_grad():
            plain = target.eval().generate(torch.tensor([[104, 105]]), max_new_tokens=12, do_sample=False,
                                           eos_token_id=None, pad_token_id=0)
        assert spec.token_ids == plain[0, 2:].tolist()  # greedy speculative = the target's own greedy
    finally:
        gw.close()


def test_an_eagle_head_folder_serves_without_naming_its_kind(tmp_path):
    """``trajkit serve --model DIR --draft HEAD``: the head's files (eagle.json) tell its kind, as for
    ``trajkit generate``; the served engine drafts with the head and greedy output is the target's own."""
    from tests.engine.helpers import trained_eagle
    from trajkit.engine.drafters.eagle import EagleDrafter

    spec = TinySpec(vocab_size=264, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=64)
    target = build_model(spec, 0, init_scale=10.0)
    target.save_pretrained(tmp_path / "model")
    byte_tokenizer().save_pretrained(tmp_path / "model")
    trained_eagle(target, layers=(1, 2), steps=60, seed=0).save(tmp_path / "head")
    gw = load_gateway(str(tmp_path / "model"), GatewayConfig(model_name="tiny"), draft=str(tmp_path / "head"),
                      num_draft_tokens=2)
    try:
        assert isinstance(gw.engine.drafter, EagleDrafter) and gw.scheduler.continuous
        prompts = [[1, 2, 3], [40, 41, 42, 43, 44]]
        outs = gw.engine.generate(prompts, SamplingParams(temperature=0.0, max_new_tokens=24))
        with torch.no_grad():
            for prompt, out in zip(prompts, outs):
                plain = target.eval().generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False,
                                               eos_token_id=None, pad_token_id=0)
                assert out.token_ids == plain[0, len(prompt):].tolist()
        assert sum(o.draft_accepted for o in outs) > 0  # the head drafted, and some drafts held
    finally:
        gw.close()
