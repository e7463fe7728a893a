"""trajkit.backends: the generation-backend seam the trainer and the gateway generate through.

    from trajkit.backends import make_backend
    backend = make_backend("vllm", model_dir="~/.cache/trajkit/smollm2-135m-instruct/model")
    out = backend.generate([[1, 2, 3]], SamplingParams(temperature=0.7, max_new_tokens=16, seed=0))
    out[0].token_ids, out[0].logprobs, out[0].finish_reason, out.policy_version
    backend.update_weights(policy.state_dict())

Two implementations: ``trajkit`` (:class:`~trajkit.backends.trajkit.TrajkitBackend`, the in-process engine,
the exact reference and the default) and ``vllm`` (:class:`~trajkit.backends.vllm.VllmBackend`, vLLM's
offline ``LLM`` in a Ray actor that runs the vLLM virtualenv's python). See docs/backends.md.
"""

from trajkit._lazy import lazy_getattr

_EXPORTS = {
    "Backend": "trajkit.backends.base",
    "Guarantees": "trajkit.backends.base",
    "BACKENDS": "trajkit.backends.registry",
    "make_backend": "trajkit.backends.registry",
    "TrajkitBackend": "trajkit.backends.trajkit",
    "VllmBackend": "trajkit.backends.vllm",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
