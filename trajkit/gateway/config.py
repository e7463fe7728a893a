"""``GatewayConfig``: how ``trajkit serve`` batches, what it reports and what it enforces; one source of the
defaults for Python callers and the CLI flags (:func:`trajkit.config.add_arguments`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from trajkit.config import Checked


@dataclass
class GatewayConfig(Checked):
    """Server settings. ``reported_context_length`` is what ``/v1/models`` says (harnesses such as the Hermes
    Agent refuse a window under 64K); ``max_context`` is what the server enforces (0 = the model's
    ``max_position_embeddings``): a prompt plus ``max_tokens`` past it is a 400, never a crash.
    ``force_temperature`` replaces the request's temperature, top-p and top-k: an RL trainer's loss assumes
    the rollouts were sampled at its own temperature without truncation, whatever the harness asks for.
    ``force_seed`` seeds every request that brings no ``seed`` from it, the session id and the call's index in
    its session, so an RL step's agent rollouts are a function of the step's seed (harnesses send none)."""

    model_name: str = "trajkit"
    host: str = "127.0.0.1"
    port: int = 8000
    reported_context_length: int = 131072
    max_context: int = 0
    default_max_tokens: int = 256
    max_batch: int = 64
    batch_wait_ms: float = 5.0
    continuous: bool = True
    max_n: int = 16
    force_temperature: float | None = None
    force_seed: int | None = None

    __section__ = ""
    __ranges__: ClassVar[dict[str, str]] = {"port": "[0, 65535]", "reported_context_length": "[1, inf)", "max_context": "[0, inf)",
                  "default_max_tokens": "[1, inf)", "max_batch": "[1, inf)", "batch_wait_ms": "[0, inf)",
                  "max_n": "[1, inf)", "force_temperature": "[0, 2]", "force_seed": "[0, inf)"}
    __field_docs__: ClassVar[dict[str, str]] = {
        "model_name": "model id the server answers to (/v1/models, the request's model field)",
        "host": "address to bind",
        "port": "TCP port (0 = any free port)",
        "reported_context_length": "context window reported in /v1/models (harness checks)",
        "max_context": "tokens a prompt + max_tokens may use (0 = the model's max_position_embeddings)",
        "default_max_tokens": "max_tokens when a request gives none",
        "max_batch": "most rows in the running batch (or in one engine call)",
        "batch_wait_ms": "how long an idle scheduler waits for more requests before it starts a batch",
        "continuous": "continuous batching: requests join the running batch between decode steps (plain, "
                      "or speculative rounds with a drafter); false: whole engine calls of the requests that "
                      "waited together",
        "max_n": "largest n (choices per request)",
        "force_temperature": "sample every request at this temperature, top-k/top-p off, whatever it asks "
                             "(RL: the trainer's rollout temperature; 0 = greedy)",
        "force_seed": "seed requests that bring none from this, the session id and the call's index in its "
                      "session (RL: the round's seed, so agent rollouts are reproducible)",
    }
