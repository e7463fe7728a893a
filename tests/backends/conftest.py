"""The backend conformance suite's fixtures: both backends over SmolLM2-135M-Instruct (float32), and an
independent reference: the HF model's full forward (no KV cache, no engine code) at the sampling temperature.

The vLLM backend is the session's one (tests/conftest.py ``vllm_backend``); the trajkit backend owns its own
copy of the model. Tests that load new weights into a backend restore the originals before they return.
"""
import pytest
import torch

BACKEND_NAMES = ["trajkit", pytest.param("vllm", marks=pytest.mark.side_venv("vllm"))]
PROMPTS = ["The capital of France is", "Write a haiku about the sea.\n", "1, 2, 3, 4,"]


@pytest.fixture(scope="session")
def reference_model(smollm2_folder):
    from trajkit.models.load import load_model, load_tokenizer

    return load_model(smollm2_folder, dtype=torch.float32).eval()


@pytest.fixture(scope="session")
def prompts(smollm2_folder):
    from trajkit.models.load import load_tokenizer

    tok = load_tokenizer(smollm2_folder, what="smollm2")
    return [tok(p)["input_ids"] for p in PROMPTS]


@pytest.fixture(scope="session")
def trajkit_backend(smollm2_folder):
    from trajkit.backends.trajkit import TrajkitBackend
    from trajkit.engine import Engine
    from trajkit.models.load import load_model, load_tokenizer

    tok = load_tokenizer(smollm2_folder, what="smollm2")
    return TrajkitBackend(Engine(load_model(smollm2_folder, dtype=torch.float32), decode=tok.decode))


@pytest.fixture(params=BACKEND_NAMES)
def backend(request):
    return request.getfixturevalue(f"{request.param}_backend")


@torch.no_grad()
def reference_greedy(model, prompt: list[int], n: int, stop: tuple[int, ...] = ()) -> list[int]:
    """Greedy decoding by full forwards of the whole sequence each step (argmax of float32 logits)."""
    ids = list(prompt)
    out = []
    for _ in range(n):
        logits = model(torch.tensor([ids])).logits[0, -1].float()
        t = int(logits.argmax())
        out.append(t)
        ids.append(t)
        if t in stop:
            break
    return out


@torch.no_grad()
def reference_logprobs(model, prompt: list[int], completion: list[int], temperature: float) -> list[float]:
    """log softmax(logits / T) of each completion token, from one float32 forward of prompt + completion."""
    ids = torch.tensor([list(prompt) + list(completion)])
    logits = model(ids).logits[0, len(prompt) - 1:-1].double() / temperature
    lp = torch.log_softmax(logits, dim=-1)
    return lp.gather(1, torch.tensor(completion)[:, None])[:, 0].tolist()
