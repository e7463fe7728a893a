"""Chunked next-token log-probs (:mod:`trajkit.models.logprobs`) on the real SmolLM2-135M-Instruct, whose
output layer is tied to its input embedding: the reference is the dense ``log_softmax(model(ids).logits)``."""
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from trajkit.models.logprobs import chunked_logprobs


def test_chunked_logprobs_equal_the_dense_ones_on_smollm2(smollm2_folder):
    model = AutoModelForCausalLM.from_pretrained(smollm2_folder, dtype=torch.float32).eval()
    assert model.config.tie_word_embeddings
    tok = AutoTokenizer.from_pretrained(smollm2_folder)
    texts = ["What is 3 + 4? Answer with only the number.", "The capital of France is Paris, and"]
    enc = tok(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        logits = model(**enc).logits[:, :-1].float() / 0.7
        dense = torch.log_softmax(logits, -1).gather(-1, enc.input_ids[:, 1:, None])[..., 0]
        chunked = chunked_logprobs(model, enc.input_ids, enc.attention_mask, 0.7, chunk=5)
    real = enc.attention_mask[:, 1:].bool()
    assert dense[real].lt(-1e-3).any()  # non-trivial distributions
    assert torch.allclose(chunked[real], dense[real], atol=1e-4)
