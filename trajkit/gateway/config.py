"""``GatewayConfig``: how ``trajkit serve`` batches, what it reports and what it enforces; one source of the
defaults for Python callers and the CLI flags (:func:`trajkit.config.add_arguments`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from trajkit.config import Checked


@dataclass
class GatewayConfig(Checked):
    """Server settings. ``max_context`` is the window the server enforces (0 = the model's
    ``max_position_embeddings``); ``reported_context_length`` is what ``/v1/models`` says (0 = that same
    window; the Hermes Agent refuses a window under 64K, so serving it a smaller model needs an override).
    ``max_tokens_overflow``: what a request whose prompt fits but whose ``max_tokens`` does not gets:
    ``clamp`` (default) samples at most the room left (``finish_reason: length`` if it runs out), ``error``
    is vLLM's 400 (``context_length_exceeded``, its wording with the numbers). A prompt that alone fills the
    window is always that 400 (see docs/gateway.md for why).
    ``force_temperature`` replaces the request's temperature, top-p and top-k: an RL trainer's loss assumes
    the rollouts were sampled at its own temperature without truncation, whatever the harness asks for.
    ``force_seed`` seeds every request that brings no ``seed`` from it, the session id and the call's index in
    its session, so an RL step's agent rollouts are a function of the step's seed (harnesses send none)."""

    model_name: str = "trajkit"
    host: str = "127.0.0.1"
    port: int = 8000
    reported_context_length: int = 0
    max_context: int = 0
    max_tokens_overflow: Literal["clamp", "error"] = "clamp"
    tool_call_format: Literal["auto", "hermes", "llama3_json", "mistral"] = "auto"
    default_max_tokens: int = 256
    max_batch: int = 64
    batch_wait_ms: float = 5.0
    continuous: bool = True
    max_n: int = 16
    force_temperature: float | None = None
    force_seed: int | None = None
    prefix_cache: bool = True
    prefix_cache_tokens: int = 32768

    __section__ = ""
    __ranges__: ClassVar[dict[str, str]] = {"port": "[0, 65535]", "reported_context_length": "[0, inf)", "max_context": "[0, inf)",
                  "default_max_tokens": "[1, inf)", "max_batch": "[1, inf)", "batch_wait_ms": "[0, inf)",
                  "max_n": "[1, inf)", "force_temperature": "[0, 2]", "force_seed": "[0, inf)",
                  "prefix_cache_tokens": "[1, inf)"}
    __field_docs__: ClassVar[dict[str, str]] = {
        "model_name": "model id the server answers to (/v1/models, the request's model field)",
        "host": "address to bind",
        "port": "TCP port (0 = any free port)",
        "reported_context_length": "context window reported in /v1/models (0 = the enforced window; the "
                                   "Hermes Agent needs >= 64000)",
        "max_context": "tokens a prompt + max_tokens may use (0 = the model's max_position_embeddings)",
        "max_tokens_overflow": "a prompt that fits with max_tokens that does not: clamp (sample at most the "
                               "room left) or error (vLLM's context_length_exceeded 400)",
        "tool_call_format": "how the model writes tool calls (auto = the chat template's own; hermes, "
                            "llama3_json, mistral)",
        "default_max_tokens": "max_tokens when a request gives none",
        "max_batch": "most rows in the running batch (or in one engine call)",
        "batch_wait_ms": "how long an idle scheduler waits for more requests before it starts a batch",
        "continuous": "continuous batching: requests join the running batch between decode steps (plain, "
                      "or speculative rounds with a drafter); false: whole engine calls of the requests that "
                      "waited together",
        "max_n": "largest n (choices per request)",
        "force_temperature": "sample every request at this temperature, top-k/top-p off, whatever it asks "
                             "(RL: the trainer's rollout temperature; 0 = greedy)",
        "prefix_cache": "exact prefix cache: the KV states of earlier calls' tokens are reused, not prefilled "
                        "again (flushed on every weight update; --no-prefix-cache turns it off)",
        "prefix_cache_tokens": "most tokens the prefix cache keeps (bytes = tokens x 2 x layers x KV heads x "
                               "head dim x dtype bytes)",
        "force_seed": "seed requests that bring none from this, the session id and the call's index in its "
                      "session (RL: the round's seed, so agent rollouts are reproducible)",
    }
