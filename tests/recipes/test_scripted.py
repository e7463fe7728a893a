"""The scripted-reply recipe: its loss equals the full-logits reference, and perturbed training is keyed."""
import random

import pytest
import torch

from trajkit.errors import ConfigError
from trajkit.models.fit import next_token_loss
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.recipes.scripted import (
    ScriptedRecipe,
    collate_replies,
    reply_examples,
    reply_loss,
    scripted_model,
)

CONV = ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
         {"role": "assistant", "content": "hello"}, {"role": "user", "content": "bye"},
         {"role": "assistant", "content": "ciao", "reasoning_content": "short"}], None)


def test_reply_examples_target_exactly_the_assistant_turns():
    tok = byte_tokenizer()
    texts = [tok.decode(ids[start:]) for ids, start in reply_examples(tok, [CONV])]
    assert texts == ["hello<|im_end|>", "<think>\nshort\n</think>\n\nciao<|im_end|>"]


def test_reply_loss_equals_the_full_logits_loss():
    tok = byte_tokenizer()
    model = build_model(TinySpec(vocab_size=259, hidden_size=32), seed=0, init_scale=3.0)
    ids, mask = collate_replies(reply_examples(tok, [CONV]), tok.pad_token_id)
    with torch.no_grad():
        reference = next_token_loss(model(input_ids=ids).logits, ids, mask)
        assert reply_loss(model, ids, mask).item() == pytest.approx(reference.item(), rel=1e-5)
    assert mask.sum().item() == len("hello") + 1 + len("<think>\nshort\n</think>\n\nciao") + 1


def test_a_perturbation_needs_its_name_in_the_cache_key():
    with pytest.raises(ConfigError, match="perturb_name"):
        scripted_model([CONV], ScriptedRecipe(), perturb=lambda m, rng: m)
    a = ScriptedRecipe(perturb_name="a").path([CONV])
    assert a != ScriptedRecipe(perturb_name="b").path([CONV]) and a == ScriptedRecipe(perturb_name="a").path([CONV])


def test_a_byte_vocabulary_model_learns_its_replies_and_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAJKIT_CACHE", str(tmp_path))
    names = iter(range(10 ** 6))

    def perturb(messages, rng: random.Random):
        next(names)
        return [{**messages[0], "content": f"Be brief. Seed {rng.randint(0, 999)}."}] + messages[1:]

    recipe = ScriptedRecipe(shape=TinySpec(hidden_size=32, max_positions=256), vocab_size=0, steps=60, lr=1e-2,
                            perturb_name="seed-line")
    folder = scripted_model([CONV], recipe, perturb)
    drawn = next(names)
    assert (folder / "report.json").exists() and drawn == 61  # 60 training draws + the held-out check
    assert scripted_model([CONV], recipe, perturb) == folder and next(names) == drawn + 1  # cached: no training
