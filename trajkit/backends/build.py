"""One builder for every backend: :class:`BackendSpec` (model, draft, drafter, k, backend name, ...) ->
:func:`build_backend`.

``trajkit serve`` (:func:`trajkit.gateway.server.load_gateway`), ``trajkit generate``, the trainer's rollout
(:func:`trajkit.rl.backend.build_backend`) and the benchmarks all build here, so one spec gives one backend
whatever the entry point (``tests/backends/test_build.py``). The CLI's flags for it are one set
(:func:`add_arguments`, :func:`spec_from_args`), their choices the registries' names.

What each backend makes of a spec is its registry entry (:data:`trajkit.backends.registry.BACKENDS`):

- ``trajkit``: the target (``target`` as given: the trainer's inference copy, the tiny pair's; else loaded from
  ``model``, with ``rope_scaling``), the drafter of kind ``drafter`` (else the kind ``draft``'s files tell, else
  none; ``model`` when a loaded ``draft`` module is given without a kind) over the ``draft`` folder read by
  the kind's own loader or over the given module, ``k`` draft tokens per round (or ``auto``), in one
  :class:`~trajkit.engine.Engine` behind :class:`~trajkit.backends.trajkit.TrajkitBackend`.
- ``vllm``: the HF folder ``model`` (a given ``target`` without one is saved to a temporary folder first) in
  vLLM's venv ``python``; a drafter becomes vLLM's ``speculative_config``
  (:func:`trajkit.backends.vllm.speculative_config`); ``max_model_len``, ``seed``, ``num_cpus``, ``lora_rank``,
  ``weight_transfer`` are :class:`~trajkit.backends.vllm.VllmBackend`'s options.

>>> BackendSpec(model="m", drafter="ngram", k="2").k
2
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from trajkit.backends.registry import BACKEND_NAMES, BACKENDS, check_backend
from trajkit.errors import ConfigError


@dataclass(frozen=True)
class BackendSpec:
    """What to build (module docstring). ``backend``: a :data:`~trajkit.backends.registry.BACKENDS` name;
    ``model``: the target's HF folder; ``draft``: a draft folder (a draft model, a window drafter, an EAGLE
    head); ``drafter``: a draft kind (:data:`trajkit.engine.drafters.names.KIND_NAMES`) or None; ``k``: draft
    tokens per round (an integer >= 1) or ``auto``; ``rope_scaling``: a
    :class:`~trajkit.models.rope.RopeScaling` applied where the target is loaded (trajkit only); the rest are
    the vLLM backend's (``python``: its venv's interpreter, required for ``vllm``)."""

    backend: str = "trajkit"
    model: str | None = None
    draft: str | None = None
    drafter: str | None = None
    k: int | str = 3
    rope_scaling: Any = None
    python: str | None = None
    max_model_len: int = 2048
    seed: int = 0
    num_cpus: float = 1
    lora_rank: int | None = None
    weight_transfer: str | None = None

    def __post_init__(self) -> None:
        check_backend(self.backend, "backend (--backend, rollout.backend)")
        object.__setattr__(self, "k", _k(self.k))
        if self.drafter is not None:
            from trajkit.engine.drafters.names import KIND_NAMES

            if self.drafter not in KIND_NAMES:
                raise ConfigError(f"drafter (--drafter, draft.kind): unknown draft kind {self.drafter!r}; use one "
                                  f"of {', '.join(KIND_NAMES)}")


def _k(k) -> int | str:
    if k == "auto":
        return k
    try:
        value = int(k)
    except (TypeError, ValueError):
        raise ConfigError(f"k (--k, draft.num_draft_tokens) expects an integer or 'auto', got {k!r}") from None
    if isinstance(k, bool) or value < 1 or value != float(k):
        raise ConfigError(f"k (--k, draft.num_draft_tokens) must be an integer >= 1 or 'auto', got {k!r}")
    return value


def build_backend(spec: BackendSpec, target=None, draft=None):
    """The backend ``spec`` names, built by its registry entry; ``target``/``draft``: modules already loaded
    (the trainer's inference copies, the tiny pair), used instead of loading ``spec.model``/``spec.draft``."""
    return BACKENDS[check_backend(spec.backend)].build(spec, target, draft)



def add_arguments(parser, draft_help: str | None = None, drafter_help: str | None = None) -> None:
    """The backend flags of ``trajkit serve`` and ``trajkit generate``: ``--backend``, ``--draft``,
    ``--drafter``, ``--k`` (choices from the registries)."""
    from trajkit.engine.drafters.names import KIND_NAMES

    parser.add_argument("--backend", choices=list(BACKEND_NAMES), default="trajkit",
                        help="who generates: trajkit's engine (default) or vLLM in its venv (make vllm-venv)")
    parser.add_argument("--draft", default=None,
                        help=draft_help or "draft folder: a draft model sharing the tokenizer, a window drafter or "
                                           "an EAGLE head (eagle.pt + eagle.json, trained on --model); its files "
                                           "tell the kind")
    parser.add_argument("--drafter", default=None, choices=list(KIND_NAMES),
                        help=drafter_help or "draft kind (default: the kind --draft's files tell, else none); "
                                             "ngram needs no --draft")
    parser.add_argument("--k", default="3", help="draft tokens per round, or auto (default: 3)")


def spec_from_args(args, **given) -> BackendSpec:
    """The spec of :func:`add_arguments`' flags (and ``--model``); ``given`` sets or overrides fields."""
    spec = BackendSpec(backend=args.backend, model=getattr(args, "model", None), draft=args.draft,
                       drafter=args.drafter, k=args.k)
    return replace(spec, **given) if given else spec
