"""verifiers' token route: ``POST /inference/v1/generate`` (vLLM's token-in/token-out generate API).

verifiers' ``TrainClient`` (through the ``renderers`` package) renders the chat on the client and sends token
ids; the server samples and answers with token ids and the log-prob of each sampled token. A worked example::

    POST /inference/v1/generate   (header X-Session-ID: run-1-0, or Authorization: Bearer run-1-0)
    {"model": "policy", "token_ids": [1, 9690, 198],
     "sampling_params": {"temperature": 1.0, "max_tokens": 8, "stop_token_ids": [2], "logprobs": 1}}
    ->
    {"id": "gen-…", "object": "generate", "model": "policy", "prompt_token_ids": [1, 9690, 198],
     "choices": [{"index": 0, "token_ids": [504, 2], "finish_reason": "stop",
                  "logprobs": {"content": [{"token": "token_id:504", "logprob": -0.31},
                                           {"token": "token_id:2", "logprob": -0.02}]}}],
     "usage": {...}, "trajkit": {"session": "run-1-0", "call": 0, "policy_version": 0}}

The call is recorded in its session exactly as a completions call with token ids is (endpoint ``generate``):
the same sessions, stitching (a later call whose ``token_ids`` start with an earlier call's prompt + sampled
ids continues that chain; the ids between are masked 0) and samples as the chat route. ``token_ids`` of a
choice are every sampled id, the stop token included (vLLM keeps a stop *token*), as trained.

``sampling_params`` takes vLLM's names: ``temperature``, ``top_p``, ``top_k``, ``max_tokens``, ``seed``, ``n``,
``stop``, ``stop_token_ids`` (added to the server's own stop ids) and ``logprobs`` (an integer: the sampled
token's log-prob is always returned; ``N > 1`` adds the ``N`` most likely tokens as ``top_logprobs``).
Other keys (``skip_special_tokens``, ``reasoning_effort``, …) are ignored, as the OpenAI routes ignore fields
they do not use; ``GatewayConfig.force_temperature``/``force_seed`` apply here as on the other routes.
Not served: ``content_parts``/``features`` (multimodal) are refused with a 400 naming the field.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trajkit.gateway.errors import ApiError
from trajkit.gateway.requests import Sampling, _is_int, _model, _need, sampling

MAX_TOP_LOGPROBS = 20


@dataclass
class GenerateRequest:
    model: str
    token_ids: list[int]
    sampling: Sampling
    stop_token_ids: list[int]


def generate_request(body: Any, max_n: int) -> GenerateRequest:
    """The validated request; anything wrong is an :class:`ApiError` naming the field."""
    _need(isinstance(body, dict), "the request body must be a JSON object", "body")
    model = _model(body)
    for field in ("content_parts", "features"):
        _need(body.get(field) is None, f"{field} (multimodal input) is not served by this gateway; send text "
              "token ids only", field)
    ids = body.get("token_ids")
    _need(isinstance(ids, list) and len(ids) > 0 and all(_is_int(t) and t >= 0 for t in ids),
          "token_ids must be a non-empty list of token ids (integers >= 0)", "token_ids")
    sp = body.get("sampling_params")
    sp = {} if sp is None else sp
    _need(isinstance(sp, dict), "sampling_params must be an object", "sampling_params")
    try:
        s = sampling(sp, max_n)
    except ApiError as exc:  # name the field where the client wrote it
        raise ApiError(exc.message, param=f"sampling_params.{exc.param}") from None
    stop_ids = sp.get("stop_token_ids") or []
    _need(isinstance(stop_ids, list) and all(_is_int(t) and t >= 0 for t in stop_ids),
          "sampling_params.stop_token_ids must be a list of token ids", "sampling_params.stop_token_ids")
    lp = sp.get("logprobs")
    _need(lp is None or (_is_int(lp) and 0 <= lp <= MAX_TOP_LOGPROBS),
          f"sampling_params.logprobs must be an integer in [0, {MAX_TOP_LOGPROBS}], got {lp!r}",
          "sampling_params.logprobs")
    s.logprobs = True
    s.top_logprobs = lp if lp is not None and lp > 1 else 0
    return GenerateRequest(model, list(ids), s, list(stop_ids))


def generate_response(rec, sid: str, out_id: str, created: int) -> dict[str, Any]:
    """The response body of the recorded call ``rec`` (a :class:`~trajkit.gateway.sessions.CallRecord`)."""
    def entry(t: int, lp: float) -> dict[str, Any]:
        return {"token": f"token_id:{t}", "logprob": lp}

    choices = []
    for k, ch in enumerate(rec.choices):
        tops = ch.top_logprobs or [None] * len(ch.token_ids)
        content = [{**entry(t, lp), **({} if alts is None else {"top_logprobs": [entry(i, v) for i, v in alts]})}
                   for t, lp, alts in zip(ch.token_ids, ch.logprobs, tops)]
        choices.append({"index": k, "token_ids": list(ch.token_ids), "finish_reason": ch.finish_reason,
                        "logprobs": {"content": content}})
    completion = sum(len(c.token_ids) for c in rec.choices)
    return {"id": out_id, "request_id": out_id, "object": "generate", "created": created, "model": rec.model,
            "prompt_token_ids": list(rec.prompt_ids), "choices": choices,
            "usage": {"prompt_tokens": len(rec.prompt_ids), "completion_tokens": completion,
                      "total_tokens": len(rec.prompt_ids) + completion},
            "trajkit": {"session": sid, "call": rec.index, "policy_version": rec.policy_version}}
