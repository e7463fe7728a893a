"""The rollout backend of a run (``rollout.backend``), built from the run's policy and draft.

``trajkit``: the engine over the policy's inference copy (and the drafter over the draft's), exact.
``vllm``: vLLM in its venv (:class:`trajkit.backends.vllm.VllmBackend`), loaded from the policy's HF folder
(a ``prepared``/``path`` policy's own; any other policy is saved to a temporary folder first); the first
``weight_sync`` pushes the trainer's weights anyway. ``draft.kind`` maps to vLLM's ``speculative_config``:
``ngram`` -> ``{"method": "ngram"}`` (prompt lookup), ``model`` -> ``{"method": "draft_model", "model":
<the draft's folder>}``; the drafters vLLM has no equivalent of (``window``) are refused. An online-distilled
``model`` draft is pushed into vLLM's drafter on every weight sync (``VllmBackend.update_draft``), so vLLM
never drafts with a stale draft.
"""
from __future__ import annotations

import tempfile

from trajkit.backends.registry import make_backend
from trajkit.errors import ConfigError
from trajkit.rl.build import policy_folder
from trajkit.rl.config import TrainConfig


def vllm_speculative_config(cfg: TrainConfig, draft_folder: str | None) -> dict | None:
    """vLLM's ``speculative_config`` for ``draft.*`` (None without a drafter)."""
    from trajkit.backends.vllm import speculative_config

    if cfg.draft.distill and cfg.draft.kind != "model":
        raise ConfigError(f"draft.distill with rollout.backend=vllm needs draft.kind=model (vLLM's draft_model "
                          f"drafter, refit on every sync); draft.kind={cfg.draft.kind} has no vLLM drafter to refit")
    if cfg.draft.kind == "model" and draft_folder is None:
        raise ConfigError("draft.kind=model with rollout.backend=vllm needs the draft as a folder: "
                          "draft.model.source=path (or prepared) with draft.model.path=DIR")
    return speculative_config(cfg.draft.kind, cfg.draft.num_draft_tokens, draft_folder)


def build_backend(cfg: TrainConfig, infer, drafter=None):
    """``rollout.backend`` over ``infer`` (the engine's inference copy of the policy) and ``drafter``."""
    if cfg.rollout.backend == "trajkit":
        from trajkit.engine import Engine

        k = cfg.draft.num_draft_tokens if drafter is not None else None
        return make_backend("trajkit", engine=Engine(infer, drafter=drafter, num_draft_tokens=k))
    from trajkit.recipes.cache import vllm_python

    folder = policy_folder(cfg.policy)
    if folder is None:  # a random or warm-started policy: vLLM loads it from a folder
        folder = tempfile.mkdtemp(prefix="trajkit-vllm-policy-")
        infer.save_pretrained(folder)
    spec = vllm_speculative_config(cfg, policy_folder(cfg.draft.model))
    # under a Ray run the rollout worker's placement bundle already holds the CPUs its vLLM actor uses
    num_cpus = 0 if cfg.cluster.ray else 1
    return make_backend("vllm", model_dir=folder, python=cfg.rollout.vllm_python or vllm_python(),
                        max_model_len=cfg.rollout.vllm_max_model_len, seed=cfg.seed, speculative_config=spec,
                        num_cpus=num_cpus,
                        weight_transfer="nccl" if cfg.cluster.weight_transfer == "nccl" else None)
