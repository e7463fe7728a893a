"""A concurrent multi-turn client load against a running gateway: ``sessions`` clients, each ``turns``
chat calls that carry the conversation forward (the reply appended, then a new user message). Used by the
concurrency test and by ``trajkit bench gateway``."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor


def run_session(url: str, sid: str, turns: int, max_tokens: int, model: str) -> list[float]:
    """One client session; returns each call's latency in seconds (raises on any non-200)."""
    import httpx

    messages = [{"role": "user", "content": f"session {sid} turn 0"}]
    latencies = []
    with httpx.Client(timeout=120) as http:
        for turn in range(turns):
            start = time.perf_counter()
            r = http.post(url + "/chat/completions", headers={"Authorization": f"Bearer {sid}"},
                          json={"model": model, "messages": messages, "max_tokens": max_tokens, "seed": turn})
            latencies.append(time.perf_counter() - start)
            r.raise_for_status()
            reply = r.json()["choices"][0]["message"]
            messages += [{"role": "assistant", "content": reply["content"] or ""},
                         {"role": "user", "content": f"session {sid} turn {turn + 1}"}]
    return latencies


def run_load(url: str, sessions: int, turns: int, max_tokens: int, model: str, prefix: str = "load",
             long_tokens: int = 0) -> dict:
    """All sessions at once; ``{"seconds", "requests", "latencies", "short_latencies"}``. ``long_tokens`` > 0:
    every other session (the even ones) asks for ``long_tokens`` per call instead of ``max_tokens`` (mixed
    lengths; ``short_latencies`` are the other sessions' calls)."""
    start = time.perf_counter()
    budget = [long_tokens if long_tokens and i % 2 == 0 else max_tokens for i in range(sessions)]
    with ThreadPoolExecutor(sessions) as pool:
        futures = [pool.submit(run_session, url, f"{prefix}-{i}", turns, budget[i], model) for i in range(sessions)]
        per_session = [f.result() for f in futures]
    latencies = [x for lat in per_session for x in lat]
    short = [x for i, lat in enumerate(per_session) if budget[i] == max_tokens for x in lat]
    return {"seconds": time.perf_counter() - start, "requests": len(latencies), "latencies": latencies,
            "short_latencies": short}
