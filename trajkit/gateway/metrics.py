"""``GET /metrics``: the gateway's counters in the Prometheus text exposition format (version 0.0.4).

Prefix cache (:mod:`trajkit.engine.prefix`), totals since the server started::

    trajkit_prefix_cache_query_tokens_total     prompt tokens looked up
    trajkit_prefix_cache_hit_tokens_total       of which served from the cache (not prefilled again)
    trajkit_prefix_cache_inserted_tokens_total  tokens whose states were stored
    trajkit_prefix_cache_evicted_tokens_total   tokens evicted under the budget
    trajkit_prefix_cache_evictions_total        blocks evicted
    trajkit_prefix_cache_flushes_total          flushes (one per weight update)
    trajkit_prefix_cache_flops_saved_total      ~ 2 x parameters x hit tokens
    trajkit_prefix_cache_tokens                 tokens held now (gauge)
    trajkit_prefix_cache_bytes                  bytes held now (gauge)
    trajkit_prefix_cache_budget_tokens          the budget (gauge; 0 = cache off)

plus ``trajkit_engine_calls_total`` and ``trajkit_policy_version``. The hit rate is
``hit_tokens_total / query_tokens_total`` (token-weighted), left to the dashboard (``rate()`` of both).
"""
from __future__ import annotations

_COUNTERS = (("query_tokens", "prompt tokens looked up in the prefix cache"),
             ("hit_tokens", "prompt tokens served from the prefix cache"),
             ("inserted_tokens", "tokens whose KV states were stored"),
             ("evicted_tokens", "tokens evicted under the budget"),
             ("evictions", "blocks evicted under the budget"),
             ("flushes", "cache flushes (one per weight update)"))
_GAUGES = (("cached_tokens", "tokens", "tokens held now"), ("cached_bytes", "bytes", "bytes held now"),
           ("budget_tokens", "budget_tokens", "most tokens the cache may hold (0 = off)"))


def prometheus_text(gateway) -> str:
    """The exposition text of ``gateway`` (:class:`~trajkit.gateway.service.Gateway`)."""
    backend = gateway.backend
    cache = backend.prefix_cache if backend.capabilities.prefix_cache else None
    snap = cache.snapshot() if cache is not None else {}
    lines: list[str] = []

    def metric(name: str, kind: str, help_: str, value: float) -> None:
        lines.extend([f"# HELP {name} {help_}", f"# TYPE {name} {kind}", f"{name} {_number(value)}"])

    for key, help_ in _COUNTERS:
        metric(f"trajkit_prefix_cache_{key}_total", "counter", help_, snap.get(key, 0))
    params = backend.num_params or 0
    metric("trajkit_prefix_cache_flops_saved_total", "counter", "prefill FLOPs not spent (~2 x params x hit tokens)",
           2 * params * snap.get("hit_tokens", 0))
    for key, name, help_ in _GAUGES:
        metric(f"trajkit_prefix_cache_{name}", "gauge", help_, snap.get(key, 0))
    metric("trajkit_engine_calls_total", "counter", "engine admissions (continuous) or generate calls",
           gateway.scheduler.calls)
    metric("trajkit_policy_version", "gauge", "version of the weights serving now",
           backend.policy_version)
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    """Exact integers (counters pass 2^53 only after ~10^15 tokens), else Python's shortest float text."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))
