"""trajkit.gateway: an OpenAI-compatible token-in/token-out server over trajkit's engine.

Any agent harness that speaks the OpenAI chat API runs against it unchanged; every call's prompt ids (rendered
on the server), sampled ids, logprobs, policy version and timing are recorded per session, and a session's
calls stitch into trainable samples by token-prefix matching (sampled tokens mask 1, everything else 0).

    from trajkit.gateway import Gateway, GatewayConfig, running
    with running(Gateway(engine, tokenizer, GatewayConfig(model_name="policy"))) as base_url:
        ...  # openai.OpenAI(base_url=base_url, api_key="session-1")

See docs/gateway.md.
"""

from trajkit._lazy import lazy_getattr

_EXPORTS = {
    "Gateway": "trajkit.gateway.service",
    "GatewayConfig": "trajkit.gateway.config",
    "ApiError": "trajkit.gateway.errors",
    "running": "trajkit.gateway.server",
    "serve": "trajkit.gateway.server",
    "load_gateway": "trajkit.gateway.server",
    "stitch": "trajkit.gateway.stitch",
    "session_samples": "trajkit.gateway.export",
    "session_hermes_rows": "trajkit.gateway.export",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
