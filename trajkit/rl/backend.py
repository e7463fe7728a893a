"""The rollout backend of a run (``rollout.backend``), built from the run's policy and draft.

``trajkit``: the engine over the policy's inference copy (and the drafter over the draft's), exact.
``vllm``: vLLM in its venv (:class:`trajkit.backends.vllm.VllmBackend`), loaded from the policy's HF folder
(a ``prepared``/``path`` policy's own; any other policy is saved to a temporary folder first); the first
``weight_sync`` pushes the trainer's weights anyway. A drafter (``draft.kind``) is refused on vLLM for
training: vLLM 0.32's log-probs of speculated tokens are wrong (:data:`SPECULATIVE_LOGPROBS`). Generation and
serving may speculate (:func:`trajkit.backends.vllm.speculative_config`), and a distilled draft would be pushed
into vLLM's drafter on every sync (``Rollout.load`` -> ``VllmBackend.update_draft``).
"""
from __future__ import annotations

from trajkit.backends.build import BackendSpec, build_backend as build
from trajkit.errors import ConfigError
from trajkit.rl.build import policy_folder
from trajkit.rl.config import TrainConfig


# vLLM 0.32 (CPU build), measured on SmolLM2 at T=0.7 (tests/backends/test_vllm_speculative.py): under ngram
# speculation the sampled tokens' log-probs are up to 23 nats off an fp32 forward; under draft_model they come
# back 0.0 / -10.8 / NaN. The trainer's ratios (mismatch, TIS, the loss's old log-probs check) need the
# sampling distribution's log-probs, so a training run does not speculate on vLLM.
SPECULATIVE_LOGPROBS = ("vLLM 0.32 returns wrong log-probs for speculated tokens (ngram: up to 23 nats off "
                        "the sampling distribution at T=0.7; draft_model: 0.0, -10.8 or NaN), which the "
                        "trainer's importance ratios need")


def vllm_speculative_config(cfg: TrainConfig, draft_folder: str | None) -> dict | None:
    """vLLM's ``speculative_config`` for ``draft.*`` in a training run: None without a drafter; a drafter is
    refused (:data:`SPECULATIVE_LOGPROBS`). The mapping itself (for generation and serving, where only the
    tokens count: greedy speculation is lossless) is :func:`trajkit.backends.vllm.speculative_config`; the
    drafter refit (``VllmBackend.update_draft``) is in place for when vLLM's log-probs are right."""
    if cfg.draft.kind == "none":
        return None
    raise ConfigError(f"draft.kind={cfg.draft.kind} with rollout.backend=vllm: {SPECULATIVE_LOGPROBS}; train with "
                      "draft.kind=none on vLLM, or speculate with rollout.backend=trajkit (exact log-probs)")


def backend_spec(cfg: TrainConfig) -> BackendSpec:
    """``rollout.backend`` and ``draft.*`` as the one :class:`~trajkit.backends.build.BackendSpec` (the vLLM
    options are read by the vLLM entry only; a drafter on vLLM is refused by the config's rules first,
    :mod:`trajkit.rl.config_rules`)."""
    from trajkit.recipes.cache import vllm_python

    # under a Ray run the rollout worker's placement bundle already holds the CPUs its vLLM actor uses
    return BackendSpec(backend=cfg.rollout.backend, model=policy_folder(cfg.policy), drafter=cfg.draft.kind,
                       k=cfg.draft.num_draft_tokens, python=cfg.rollout.vllm_python or vllm_python(),
                       max_model_len=cfg.rollout.vllm_max_model_len, seed=cfg.seed,
                       num_cpus=0 if cfg.cluster.ray else 1, lora_rank=cfg.policy.lora.rank or None,
                       weight_transfer="nccl" if cfg.cluster.weight_transfer == "nccl" else None)


def build_backend(cfg: TrainConfig, infer, draft=None):
    """``rollout.backend`` over ``infer`` (the engine's inference copy of the policy) and ``draft`` (the
    drafter's inference copy of the draft, of kind ``draft.kind``), through the one builder."""
    return build(backend_spec(cfg), target=infer, draft=draft)
