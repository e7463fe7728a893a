"""Checkpoints load elsewhere: ``policy/`` (and an HF ``draft/``) in plain transformers with the trainer's
logits, the byte tokenizer through ``AutoTokenizer``, ``trainer_state.pt`` with ``weights_only=True``;
first-format checkpoints and a different draft kind are refused with a clear message."""
import random

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from trajkit.errors import ConfigError
from trajkit.models.load import load_model
from trajkit.models.tokenizer import IM_END_ID, PAD_ID, byte_tokenizer
from trajkit.rl.checkpoint import copy_weights, rng_state, save_hf, set_rng_state
from trajkit.rl.trainer import Trainer

DISTILL = ("draft.distill=true",)


def _trained(tiny, *overrides, steps=1):
    trainer = Trainer(tiny(*overrides), logger=False)
    for _ in range(steps):
        trainer.step_once()
    return trainer


def _logits(model, ids):
    model.eval()
    with torch.no_grad():
        return model(input_ids=ids).logits


def _ids(vocab, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (3, 11), generator=g)


def test_plain_transformers_loads_the_policy_and_draft_with_the_trainers_logits(tiny, tmp_path):
    trainer = _trained(tiny, "draft.kind=model", *DISTILL)
    s, ids = trainer.state, _ids(len(trainer.state.tokenizer))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # move every weight, as training would, so the initial weights cannot pass below
        for p in s.side.policy.parameters():
            p.add_(0.01 * torch.randn(p.shape, generator=g))
    path = trainer.save(str(tmp_path / "ckpt"))

    policy = AutoModelForCausalLM.from_pretrained(f"{path}/policy")
    assert torch.equal(_logits(policy, ids), _logits(s.side.policy, ids))
    draft = AutoModelForCausalLM.from_pretrained(f"{path}/draft")
    assert torch.equal(_logits(draft, ids), _logits(s.side.draft, ids))
    # the weights moved, so equal logits mean the live weights were saved, not the initial ones
    initial = Trainer(tiny("draft.kind=model", *DISTILL), logger=False).state.side.policy
    assert not torch.equal(_logits(policy, ids), _logits(initial, ids))
    gen = GenerationConfig.from_pretrained(f"{path}/policy")
    assert (gen.eos_token_id, gen.pad_token_id) == (IM_END_ID, PAD_ID)
    assert AutoTokenizer.from_pretrained(f"{path}/draft").eos_token_id == IM_END_ID


def test_the_saved_byte_tokenizer_round_trips_through_autotokenizer(tiny, tmp_path):
    path = _trained(tiny, steps=1).save(str(tmp_path / "ckpt"))
    tok = AutoTokenizer.from_pretrained(f"{path}/policy")
    rng = random.Random(0)
    alphabet = "ab \n{}\":<>/_é漢🙂\t" + "".join(map(chr, range(0x20, 0x7f)))
    for _ in range(50):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))).replace("<|", "< |")
        assert tok.encode(text, add_special_tokens=False) == list(text.encode("utf-8"))  # the byte codec
        assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    chat = [{"role": "user", "content": "hé"}]
    assert tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == \
        "<|im_start|>user\nhé<|im_end|>\n<|im_start|>assistant\n"
    assert tok.encode("<|im_end|><|endoftext|>", add_special_tokens=False) == [IM_END_ID, PAD_ID]
    assert (tok.eos_token_id, tok.pad_token_id) == (IM_END_ID, PAD_ID)


def test_trainer_state_loads_with_weights_only(tiny, tmp_path):
    trainer = _trained(tiny, "draft.kind=window", *DISTILL, steps=2)
    path = trainer.save(str(tmp_path / "ckpt"))
    blob = torch.load(f"{path}/trainer_state.pt", weights_only=True)
    s = trainer.state
    assert (blob["step"], blob["stream"], blob["draft_kind"]) == (2, s.stream.state_dict(), "window")
    assert blob["alarm"]["history"] == s.alarm.history and len(blob["alarm"]["history"]) == 2
    for saved, live in ((blob["optimizer"], s.side.optimizer), (blob["draft_optimizer"], s.side.draft_optimizer)):
        params = [p for group in live.param_groups for p in group["params"]]
        assert len(saved["state"]) == len(params)
        for i, p in enumerate(params):
            assert torch.equal(saved["state"][i]["exp_avg"], live.state[p]["exp_avg"])
            assert torch.equal(saved["state"][i]["exp_avg_sq"], live.state[p]["exp_avg_sq"])
    assert sorted(p.name for p in (tmp_path / "ckpt" / "draft").iterdir()) == ["window.json", "window.pt"]


def test_rng_states_round_trip_through_a_weights_only_file(tmp_path):
    random.seed(3), np.random.seed(4), torch.manual_seed(5)
    random.gauss(0, 1)  # leaves a cached Gaussian in Python's state
    torch.save(rng_state(), tmp_path / "rng.pt")
    expected = (random.random(), random.gauss(0, 1), np.random.rand(3).tolist(), torch.rand(3))
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    got = (random.random(), random.gauss(0, 1), np.random.rand(3).tolist(), torch.rand(3))
    assert got[:3] == expected[:3] and torch.equal(got[3], expected[3])


def test_a_first_format_checkpoint_is_refused_clearly(tiny, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    torch.save({"step": 3}, old / "state.pt")
    with pytest.raises(ConfigError, match="older trajkit format"):
        Trainer(tiny(f"checkpoint.resume_from={old}"), logger=False)
    with pytest.raises(ConfigError, match="no trainer_state.pt"):
        Trainer(tiny(f"checkpoint.resume_from={tmp_path}"), logger=False)


def test_resuming_with_another_draft_kind_is_refused(tiny, tmp_path):
    path = _trained(tiny, "draft.kind=window").save(str(tmp_path / "ckpt"))
    with pytest.raises(ConfigError, match="set draft.kind=window"):
        Trainer(tiny("draft.kind=model", f"checkpoint.resume_from={path}"), logger=False)


def _tied(seed):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=259, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=True))


def test_tied_embeddings_survive_save_and_restore(tmp_path):
    """SmolLM2 ties its output head to the embeddings; save_pretrained stores the matrix once, and the
    restore copies into the live model without untying it (the optimiser holds the one parameter)."""
    saved, live = _tied(0), _tied(1)
    save_hf(saved, byte_tokenizer(), tmp_path / "policy")
    copy_weights(live, load_model(tmp_path / "policy"))
    for (name, a), b in zip(saved.state_dict().items(), live.state_dict().values()):
        assert torch.equal(a, b), name
    assert live.lm_head.weight.data_ptr() == live.model.embed_tokens.weight.data_ptr()


def test_real_smollm2_policy_folder_loads_in_plain_transformers(tmp_path, smollm2_folder):
    """The real 135M model (tied embeddings, its own tokenizer and chat template) through the same writer."""
    model, tok = load_model(smollm2_folder), AutoTokenizer.from_pretrained(smollm2_folder)
    save_hf(model, tok, tmp_path / "policy")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "policy")
    assert loaded.config.tie_word_embeddings and loaded.dtype == torch.float32
    chat = [{"role": "user", "content": "What is 12*7?"}]
    text = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert AutoTokenizer.from_pretrained(tmp_path / "policy").apply_chat_template(
        chat, tokenize=False, add_generation_prompt=True) == text
    ids = torch.tensor([tok.encode(text, add_special_tokens=False)])
    assert torch.equal(_logits(loaded, ids), _logits(model, ids))
    assert GenerationConfig.from_pretrained(tmp_path / "policy").eos_token_id == tok.eos_token_id


def test_the_policy_side_is_one_object_and_its_old_names_point_to_it(tiny, tmp_path):
    from trajkit.rl.checkpoint import load_checkpoint
    from trajkit.rl.learner import PolicySide

    trainer = _trained(tiny, "draft.kind=window", *DISTILL, steps=2)
    s = trainer.state
    assert isinstance(s.side, PolicySide) and s.learner.side is s.side  # the learner steps this very side
    for name in ("policy", "optimizer", "draft", "draft_optimizer", "reference", "grad_scaler", "teacher"):
        with pytest.raises(AttributeError, match=rf"TrainState\.{name} is now TrainState\.side\.{name}"):
            getattr(s, name)
    path = trainer.save(str(tmp_path / "ckpt"))
    fresh = Trainer(tiny("draft.kind=window", *DISTILL), logger=False)
    counters = load_checkpoint(fresh.state.side, path)
    assert counters == s.counters() and counters["step"] == 2
    fresh.state.restore(counters)
    assert fresh.state.counters() == s.counters()
    for a, b in zip(fresh.state.side.policy.state_dict().values(), s.side.policy.state_dict().values()):
        assert torch.equal(a, b)
