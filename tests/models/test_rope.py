"""YaRN written into a model's config: checked against a Hugging Face model built from a config written by
hand here (the transformers 5.x ``rope_parameters`` form), its no-cache forward the reference for the
engine's cached decoding past the original window; the engine and the gateway use the scaled window."""
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from trajkit.engine import Engine, SamplingParams
from trajkit.errors import ConfigError
from trajkit.models.load import load_model
from trajkit.models.rope import RopeScaling, apply_rope_scaling, rescaled
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer

ORIGINAL = 64
YARN = RopeScaling(type="yarn", factor=4.0)
SPEC = TinySpec(vocab_size=259, hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64,
                max_positions=ORIGINAL)


def _model():
    return build_model(SPEC, seed=0, init_scale=5.0)


def _reference(model):
    """The scaled model as a user of transformers writes it: a literal rope_parameters dict."""
    cfg = LlamaConfig(**{**model.config.to_dict(), "max_position_embeddings": 4 * ORIGINAL,
                         "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0,
                                             "original_max_position_embeddings": ORIGINAL}})
    ref = LlamaForCausalLM(cfg).eval()
    ref.load_state_dict(model.state_dict())
    return ref


@torch.no_grad()
def _logprobs(model, ids: list[int], start: int) -> torch.Tensor:
    """No-cache forward: log p(ids[t] | ids[:t]) for t >= start."""
    logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, :-1].float()
    logp = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
    return logp[start - 1:]


def test_written_parameters_are_transformers_yarn():
    model = rescaled(_model(), YARN)
    assert model.config.max_position_embeddings == 256
    assert dict(model.config.rope_parameters) == {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                                  "original_max_position_embeddings": 64, "beta_fast": 32.0,
                                                  "beta_slow": 1.0}
    ref = _reference(model)
    assert torch.equal(model.model.rotary_emb.inv_freq, ref.model.rotary_emb.inv_freq)
    assert model.model.rotary_emb.attention_scaling == ref.model.rotary_emb.attention_scaling == pytest.approx(
        0.1 * torch.log(torch.tensor(4.0)).item() + 1)
    plain = _model().model.rotary_emb.inv_freq
    assert not torch.equal(model.model.rotary_emb.inv_freq, plain)  # the long wavelengths were interpolated


def test_engine_logprobs_past_the_original_window_equal_a_no_cache_forward():
    """Sampled decoding with the KV cache from a 50-token prompt to position 200: every recorded
    log-prob equals the reference's no-cache forward (to float32 accumulation order), and differs from
    the unscaled model's past position 64 by far more than that."""
    model = rescaled(_model(), YARN)
    prompt = list(torch.randint(3, 259, (50,), generator=torch.Generator().manual_seed(0)).tolist())
    out = Engine(model).generate([prompt], SamplingParams(max_new_tokens=150, seed=0))[0]
    assert len(out.token_ids) == 150
    ids = prompt + out.token_ids
    ref = _logprobs(_reference(model), ids, len(prompt))
    got = torch.tensor(out.logprobs)
    torch.testing.assert_close(got, ref, atol=2e-4, rtol=0)
    unscaled = _logprobs(_model(), ids, len(prompt))
    past = slice(ORIGINAL - len(prompt), None)  # completion tokens at positions >= 64
    assert (got[past] - unscaled[past]).abs().max() > 0.1


def test_greedy_generation_across_the_old_boundary_equals_the_reference():
    model = rescaled(_model(), YARN)
    prompt = list(range(100, 160))  # 60 tokens: the boundary at 64 is crossed at the fifth token
    out = Engine(model).generate([prompt], SamplingParams(temperature=0.0, max_new_tokens=40))[0]
    with torch.no_grad():
        ref = _reference(model).generate(torch.tensor([prompt]), max_new_tokens=40, do_sample=False,
                                         use_cache=False, eos_token_id=None, pad_token_id=0)
    assert out.token_ids == ref[0, len(prompt):].tolist()


def test_engine_refuses_positions_past_the_scaled_window():
    with pytest.raises(ConfigError, match="past the model's 64 positions"):
        Engine(_model()).generate([[1] * 60], SamplingParams(max_new_tokens=10))
    engine = Engine(rescaled(_model(), YARN))
    assert len(engine.generate([[1] * 60], SamplingParams(max_new_tokens=10, seed=0))[0].token_ids) == 10
    with pytest.raises(ConfigError, match="prompt \\+ max_new_tokens is 257 tokens, past the model's 256 positions"):
        engine.generate([[1] * 250], SamplingParams(max_new_tokens=7))


def test_load_model_scales_a_folder_and_a_saved_scaled_model_loads_as_it_was(tmp_path):
    _model().save_pretrained(tmp_path / "plain")
    loaded = load_model(tmp_path / "plain", rope_scaling=YARN)
    assert loaded.config.max_position_embeddings == 256
    ids = list(range(3, 203))
    torch.testing.assert_close(_logprobs(loaded, ids, 1), _logprobs(_reference(_model()), ids, 1), atol=0, rtol=0)
    loaded.save_pretrained(tmp_path / "scaled")
    again = load_model(tmp_path / "scaled")  # no rope_scaling given: the saved config carries it
    assert again.config.rope_parameters["rope_type"] == "yarn" and again.config.max_position_embeddings == 256
    assert load_model(tmp_path / "scaled", rope_scaling=YARN).config.max_position_embeddings == 256  # same: no-op
    with pytest.raises(ConfigError, match="already has YaRN"):
        load_model(tmp_path / "scaled", rope_scaling=RopeScaling(type="yarn", factor=2.0))


def test_gateway_enforces_and_reports_the_scaled_window(tmp_path):
    from trajkit.gateway import GatewayConfig
    from trajkit.gateway.server import load_gateway

    _model().save_pretrained(tmp_path / "model")
    byte_tokenizer().save_pretrained(tmp_path / "model")
    for scaling, window in ((None, 64), (YARN, 256)):
        gw = load_gateway(str(tmp_path / "model"), GatewayConfig(model_name="tiny"), rope_scaling=scaling)
        try:
            assert gw.max_context == window
            assert gw.models_list()["data"][0]["max_model_len"] == window
        finally:
            gw.close()


@pytest.mark.parametrize("kwargs,match", [
    ({"type": "yarn"}, "factor must be > 1 for type yarn"),
    ({"factor": 2.0}, "need rope_scaling.type=yarn"),
    ({"type": "yarn", "factor": 2.0, "beta_slow": 40.0}, "beta_slow .* must be < beta_fast"),
    ({"type": "rope"}, "rope_scaling.type must be one of"),
])
def test_bad_settings_say_what_to_set(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        RopeScaling(**kwargs)


def test_other_rope_types_are_refused():
    config = _model().config
    config.rope_parameters = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}
    with pytest.raises(ConfigError, match="already uses rope type 'linear'"):
        apply_rope_scaling(config, YARN)


def test_serve_flags_build_the_scaling():
    from trajkit.cli.main import build_parser
    from trajkit.config import from_args

    args = build_parser().parse_args(["serve", "--model", "m", "--rope-type", "yarn", "--rope-factor", "4"])
    assert from_args(RopeScaling, args, prefix="rope_") == YARN
    assert not from_args(RopeScaling, build_parser().parse_args(["serve", "--model", "m"]), prefix="rope_").active
