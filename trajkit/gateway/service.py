"""``Gateway``: the backend, the tokenizer and the sessions behind the HTTP routes (no HTTP in here).

One request's path: validate (:mod:`~trajkit.gateway.requests`) -> render and tokenise the prompt once on
the server (:mod:`~trajkit.gateway.render`) -> check the context -> the scheduler's next engine call
(:mod:`~trajkit.gateway.scheduler`) -> cut at stop strings -> parse the text into the API message
(:mod:`~trajkit.gateway.parse`) -> record ids, logprobs, policy version and timing in the session.

Prompt ids reuse the session's own ids: when the rendered prompt text starts with the text of an earlier
call's prompt + sampled ids (decoded exactly), the prompt is those ids followed by the encoding of the rest
only. The model then continues from the very tokens it sampled (no decode -> encode drift at turn
boundaries), and the stitcher finds them as a token prefix. Where the text does not start that way (the
template rewrote history) the whole prompt is encoded afresh and the stitched chain forks.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from dataclasses import dataclass, replace
from collections.abc import Callable
from typing import Any, Protocol

from trajkit.backends.registry import as_backend
from trajkit.engine import SamplingParams
from trajkit.engine.prefix import tokenizer_fingerprint
from trajkit.engine.rng import mix
from trajkit.gateway.access import Access
from trajkit.gateway.config import GatewayConfig
from trajkit.gateway.errors import ApiError, output_too_long, prompt_too_long
from trajkit.gateway.live import LiveText
from trajkit.gateway.formats import resolve_format
from trajkit.gateway.generate import generate_request, generate_response
from trajkit.gateway.parse import NOT_REPRODUCIBLE, not_reproducible
from trajkit.gateway.render import ChatRenderer
from trajkit.gateway.requests import Sampling, chat_request, completion_request
from trajkit.gateway.scheduler import JobResult, Scheduler
from trajkit.gateway.sessions import CallRecord, ChoiceRecord, Forced, Session, SessionStore
from trajkit.gateway.stops import stop_plan

log = logging.getLogger("trajkit.gateway")


class Live(Protocol):
    """A streaming response's listener (the HTTP layer's SSE queue)."""

    def start(self) -> None: ...

    def text(self, choice: int, delta: str) -> None: ...


@dataclass
class Prepared:
    session: Session
    prompt_ids: list[int]
    params: list[SamplingParams]
    stop: list[str]
    received: float
    forced: str = ""  # text forced after the prompt by tool_choice (its ids end prompt_ids)
    stop_ids: tuple[int, ...] = ()  # every id that ends a choice: the server's and the request's


class Gateway:
    """Serves one backend (:class:`trajkit.backends.base.Backend`; a bare trajkit ``Engine`` is wrapped,
    :func:`~trajkit.backends.registry.as_backend`) under the names in ``config.model_name`` (comma-separated).
    ``lock``: held for every backend call (default: the scheduler's own); whoever else loads weights into the
    backend takes it too. ``locked``: a request reaches only the session its API key is bound to, and the
    routes that read across sessions need ``access.admin_token`` (:mod:`~trajkit.gateway.access`); default
    open. What the gateway uses of the backend beyond ``generate`` it reads from ``backend.capabilities``."""

    def __init__(self, backend, tokenizer, config: GatewayConfig | None = None, lock=None, locked: bool = False):
        self.backend, self.tokenizer = as_backend(backend), tokenizer
        self.config = config or GatewayConfig()
        self.models = [m.strip() for m in self.config.model_name.split(",") if m.strip()]
        self.renderer = ChatRenderer.for_tokenizer(tokenizer)
        self.format, self.format_note = resolve_format(self.config.tool_call_format, tokenizer,
                                                       self.renderer.rendering.mode)
        self.sessions = SessionStore()
        self.access = Access(self.sessions, locked)
        self.scheduler = Scheduler(self.backend, self.config.max_batch, self.config.batch_wait_ms / 1000, lock,
                                   continuous=self.config.continuous)
        limit = self.backend.context_window
        self.max_context = self.config.max_context or (limit if isinstance(limit, int) else 1 << 30)
        self.stops = stop_plan(tokenizer, self.backend.generation_config)
        self.stop_ids = self.stops.ids
        if self.stops.warning:
            log.warning("trajkit gateway: %s", self.stops.warning)
        self.started = time.time()
        if self.backend.capabilities.prefix_cache:
            cache = self.backend.set_prefix_cache(self.config.prefix_cache_tokens if self.config.prefix_cache else 0)
            if cache is not None:  # ids from another tokenizer or template never meet these states
                cache.bind(tokenizer=tokenizer_fingerprint(tokenizer))
        self.on_record: list[Callable[[str, CallRecord], None]] = []  # told (session id, record) per finished call
        self.degraded = _degraded(self.backend, self.config, self.scheduler)
        for note in self.degraded:
            log.warning("trajkit gateway: %s", note)

    @property
    def engine(self):
        """trajkit's in-process engine when the backend is one (``backend.engine``), else None."""
        return self.backend.engine

    # --- request handling ---------------------------------------------------------------------------
    async def chat(self, body: Any, sid: str, live: Live | None = None) -> dict[str, Any]:
        """One chat completion. ``live`` (streaming): told ``start()`` once the request is valid and queued,
        then ``text(choice, delta)`` with each safe text delta as tokens are sampled (:mod:`.live`)."""
        req = chat_request(body, self.config.max_n)
        self._check_model(req.model)
        session = self.sessions.get(sid, req.model)
        tools = None if req.tool_choice == "none" else req.tools
        text = self.renderer.text(req.messages, tools)
        forced = self.format.forced(req.tool_choice)
        prompt_ids = self._prompt_ids(session, text) + (self._encode(forced) if forced else [])
        prep = self._prepare(session, prompt_ids, req.sampling, "messages")
        prep.forced = forced
        result = await self._generate(prep, live, blocks=True)
        record = self._record(prep, result, "chat", req.model, messages=req.messages, tools=req.tools)
        out = self._chat_response(record, sid, body.get("return_token_ids") is True, req.sampling.logprobs, tools)
        self._finished(session, record)
        return out

    async def completion(self, body: Any, sid: str, live: Live | None = None) -> dict[str, Any]:
        req = completion_request(body, self.config.max_n)
        self._check_model(req.model)
        session = self.sessions.get(sid, req.model)
        if isinstance(req.prompt, str):
            ids = self._encode(req.prompt)
        else:
            self._check_vocab(req.prompt, "prompt")
            ids = list(req.prompt)
        prep = self._prepare(session, ids, req.sampling, "prompt")
        result = await self._generate(prep, live, blocks=False)
        record = self._record(prep, result, "completions", req.model, chat=False)
        out = self._completion_response(record, sid, body.get("return_token_ids") is True, req.sampling.logprobs)
        self._finished(session, record)
        return out

    async def generate(self, body: Any, sid: str) -> dict[str, Any]:
        """verifiers' token route (:mod:`.generate`): token ids in, sampled ids and their log-probs out,
        recorded as a completions call with token ids is."""
        req = generate_request(body, self.config.max_n)
        self._check_model(req.model)
        self._check_vocab(req.token_ids, "token_ids")
        self._check_vocab(req.stop_token_ids, "sampling_params.stop_token_ids")
        session = self.sessions.get(sid, req.model)
        prep = self._prepare(session, req.token_ids, req.sampling, "token_ids", req.stop_token_ids)
        result = await self._generate(prep, None, blocks=False)
        record = self._record(prep, result, "generate", req.model, chat=False)
        out = generate_response(record, sid, f"gen-{uuid.uuid4().hex[:24]}", int(time.time()))
        self._finished(session, record)
        return out

    def _check_vocab(self, ids: list[int], param: str) -> None:
        bad = next((t for t in ids if t >= self.backend.vocab_size), None)
        if bad is not None:
            raise ApiError(f"token id {bad} is outside the vocabulary (size {self.backend.vocab_size})", param=param)

    def _finished(self, session: Session, record: CallRecord) -> None:
        """The call is complete (its message built): tell the listeners (``--save-dir``'s log) before replying."""
        for listener in self.on_record:
            listener(session.id, record)

    async def _generate(self, prep: Prepared, live: Live | None, blocks: bool) -> JobResult:
        """Queue the job; with ``live``, hand it each choice's safe text as the tokens arrive."""
        if live is None:
            return await asyncio.wrap_future(self.scheduler.submit(prep.prompt_ids, prep.params,
                                                                   tag=prep.session.tag))
        loop = asyncio.get_running_loop()
        def decode(ids: list[int]) -> str:
            return prep.forced + self._decode(ids)
        texts = [LiveText(decode, prep.stop, self.stop_ids, self.format.holds if blocks else "") for _ in prep.params]

        def push(k: int, ids: list[int]) -> None:  # on the event loop
            delta = texts[k].push(ids)
            if delta:
                live.text(k, delta)

        future = self.scheduler.submit(prep.prompt_ids, prep.params,
                                       lambda k, ids: loop.call_soon_threadsafe(push, k, ids), prep.session.tag)
        live.start()
        return await asyncio.wrap_future(future)

    def _check_model(self, model: str) -> None:
        if model not in self.models:
            raise ApiError(f"model {model!r} is not served here; use one of {', '.join(self.models)}",
                           param="model", status=404, code="model_not_found")

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def _prompt_ids(self, session: Session, text: str) -> list[int]:
        """The session's longest earlier token sequence whose text starts ``text``, then the rest encoded."""
        with session.lock:
            best = max((p for p in session.texts if text.startswith(p[0])), key=lambda p: len(p[0]), default=None)
        if best is None or not best[0]:
            return self._encode(text)
        return best[1] + self._encode(text[len(best[0]):])

    def _prepare(self, session: Session, prompt_ids: list[int], s: Sampling, prompt_param: str,
                 extra_stop_ids: list[int] = ()) -> Prepared:
        room = self.max_context - len(prompt_ids)
        if room < 1:
            raise prompt_too_long(len(prompt_ids), self.max_context, prompt_param)
        if s.max_tokens is not None and s.max_tokens > room and self.config.max_tokens_overflow == "error":
            raise output_too_long(len(prompt_ids), s.max_tokens, self.max_context)
        forced = session.forced or Forced(self.config.force_temperature, self.config.force_seed)
        budget = forced.max_tokens if forced.max_tokens is not None else self.config.default_max_tokens
        max_new = min(s.max_tokens if s.max_tokens is not None else budget, room)
        if forced.temperature is not None:
            s = replace(s, temperature=forced.temperature, top_k=0, top_p=1.0)
        # an RL round's session (session.forced) seeds every request, whatever seed it brings: a harness that
        # pins one would make a group's members copies of each other (no advantage) or replay another row
        if forced.seed is not None and (s.seed is None or session.forced is not None):
            s = replace(s, seed=session_seed(forced.seed, session.seed_name, session.next_call()))
        stop_ids = tuple(self.stop_ids) + tuple(t for t in dict.fromkeys(extra_stop_ids) if t not in self.stop_ids)
        params = [SamplingParams(temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, max_new_tokens=max_new,
                                 stop_token_ids=stop_ids, top_logprobs=s.top_logprobs,
                                 seed=None if s.seed is None else (s.seed if i == 0 else mix(s.seed, i)))
                  for i in range(s.n)]
        stop = s.stop + [t for t in self.stops.strings if t not in s.stop]
        return Prepared(session, prompt_ids, params, stop, time.perf_counter(), stop_ids=stop_ids)

    def _record(self, prep: Prepared, result: JobResult, endpoint: str, model: str, chat: bool = True,
                messages=None, tools=None) -> CallRecord:
        choices = [self._choice(c, prep.stop, chat, prep.forced, prep.stop_ids) for c in result.completions]
        timing = {"queued_s": result.queued_s, "generate_s": result.generate_s, "first_token_s": result.first_token_s,
                  "total_s": time.perf_counter() - prep.received, "batch_rows": result.batch_rows}
        hit = result.completions[0].cached_tokens if result.completions else 0
        prefix = {"query_tokens": len(prep.prompt_ids), "hit_tokens": hit, "new_tokens": len(prep.prompt_ids) - hit,
                  "flops_saved": 2 * (self.backend.num_params or 0) * hit}
        record = CallRecord(-1, endpoint, model, prep.prompt_ids, choices, result.policy_version, timing,
                            messages, tools, forced_text=prep.forced, prefix_cache=prefix)
        prep.session.add(record)
        with prep.session.lock:
            for ch in choices:
                ids = prep.prompt_ids + ch.token_ids
                prep.session.texts.append((self._decode(ids), ids))
        return record

    def _choice(self, completion, stop: list[str], chat: bool, forced: str = "", stop_ids=None) -> ChoiceRecord:
        """``forced``: the text tool_choice put after the prompt; the choice's text starts with it.
        ``stop_ids``: the ids that ended the choice (default: the server's)."""
        stop_ids = self.stop_ids if stop_ids is None else stop_ids
        ids, lps, finish = list(completion.token_ids), list(completion.logprobs), completion.finish_reason
        tops = list(completion.top_logprobs) if completion.top_logprobs is not None else None
        body = ids[:-1] if finish == "stop" and ids and ids[-1] in stop_ids else ids
        text = self._decode(body)
        cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=-1)
        if cut >= 0:
            k = next(k for k in range(1, len(body) + 1) if _has_stop(self._decode(body[:k]), stop))
            ids, lps, text, finish = ids[:k], lps[:k], text[:cut], "stop"
            tops = tops[:k] if tops is not None else None
        return ChoiceRecord(ids, lps, finish, forced + text, top_logprobs=tops)

    # --- responses ----------------------------------------------------------------------------------
    def _chat_response(self, rec: CallRecord, sid: str, with_ids: bool, logprobs: bool = False,
                       tools: list | None = None) -> dict[str, Any]:
        choices = []
        for k, ch in enumerate(rec.choices):
            parsed = self.format.parse(ch.text, f"{sid}:{rec.index}:{k}")
            if not any(d["code"] == NOT_REPRODUCIBLE for d in parsed.diagnostics):
                why = self._renders_back(rec, ch, parsed.message(), tools)
                if why is not None:
                    parsed.diagnostics.append(not_reproducible(*why))
            ch.message = parsed.message()
            finish = "tool_calls" if parsed.calls else ch.finish_reason
            item = {"index": k, "message": ch.message, "finish_reason": finish,
                    "logprobs": {"content": self._token_logprobs(ch)} if logprobs else None}
            if with_ids:
                item["token_ids"] = ch.token_ids
            choices.append(item)
        return self._envelope(rec, sid, "chat.completion", choices, with_ids)

    def _renders_back(self, rec: CallRecord, ch: ChoiceRecord, msg: dict, tools: list | None
                      ) -> tuple[str, int] | None:
        """None when the template's render of the conversation with ``msg`` appended starts with the decode
        of the prompt + sampled ids (what the next call's prompt-id reuse needs); else (why not, where in
        the reply)."""
        sampled = self._decode(rec.prompt_ids + ch.token_ids)
        try:
            again = self.renderer.text(list(rec.messages or []) + [msg], tools, generation=False)
        except Exception as exc:  # a template that raises on the message: say so, never fail the call
            return f"the chat template cannot render the message back ({type(exc).__name__}: {exc})", 0
        if again.startswith(sampled):
            return None
        at = next((i for i, (a, b) in enumerate(zip(again, sampled)) if a != b), min(len(again), len(sampled)))
        reply_at = at - (len(sampled) - len(self._decode(ch.token_ids)))
        if reply_at < 0:
            return ("the chat template renders the earlier turns differently once this reply is appended (it is "
                    "not append-only, e.g. it drops earlier reasoning)"), 0
        return "the chat template renders this message as other text than the model wrote", reply_at

    def _completion_response(self, rec: CallRecord, sid: str, with_ids: bool, logprobs: bool = False
                             ) -> dict[str, Any]:
        choices = []
        for k, ch in enumerate(rec.choices):
            item = {"index": k, "text": ch.text, "finish_reason": ch.finish_reason, "logprobs": None}
            if logprobs:
                entries = self._token_logprobs(ch)
                offsets = [0]
                for e in entries[:-1]:
                    offsets.append(offsets[-1] + len(e["token"]))
                item["logprobs"] = {"tokens": [e["token"] for e in entries],
                                    "token_logprobs": [e["logprob"] for e in entries],
                                    "top_logprobs": [{t["token"]: t["logprob"] for t in e["top_logprobs"]}
                                                     for e in entries] if ch.top_logprobs is not None else None,
                                    "text_offset": offsets}
            if with_ids:
                item["token_ids"] = ch.token_ids
            choices.append(item)
        return self._envelope(rec, sid, "text_completion", choices, with_ids)

    def _token_logprobs(self, ch: ChoiceRecord) -> list[dict[str, Any]]:
        """OpenAI ``logprobs.content`` of one choice: every sampled token (the stop token included, so the
        values sum to the sequence log-prob a loss uses), its log-prob as recorded (under the distribution
        it was sampled from: temperature, top-k, top-p applied), its text and the UTF-8 bytes of that text
        (a token holding part of a character decodes to U+FFFD), and with ``top_logprobs`` the most likely
        tokens of that same distribution (those a top-k/top-p filter removed are left out)."""
        def entry(t: int, lp: float) -> dict[str, Any]:
            text = self._decode([t])
            return {"token": text, "logprob": lp, "bytes": list(text.encode("utf-8"))}
        tops = ch.top_logprobs or [[] for _ in ch.token_ids]
        return [{**entry(t, lp), "top_logprobs": [entry(i, v) for i, v in alts]}
                for t, lp, alts in zip(ch.token_ids, ch.logprobs, tops)]

    def _envelope(self, rec: CallRecord, sid: str, obj: str, choices: list, with_ids: bool) -> dict[str, Any]:
        # the prefix cache is shared by every session: on a locked gateway a hit count would tell a session how
        # much of its prompt another session had sent (the record keeps it; the response says 0)
        cached = 0 if self.access.locked else (rec.prefix_cache or {}).get("hit_tokens", 0)
        out = {"id": f"{'chatcmpl' if obj.startswith('chat') else 'cmpl'}-{uuid.uuid4().hex[:24]}", "object": obj,
               "created": int(time.time()), "model": rec.model, "choices": choices,
               "usage": {"prompt_tokens": len(rec.prompt_ids),
                         "completion_tokens": sum(len(c.token_ids) for c in rec.choices),
                         "total_tokens": len(rec.prompt_ids) + sum(len(c.token_ids) for c in rec.choices),
                         "prompt_tokens_details": {"cached_tokens": cached}},
               "trajkit": {"session": sid, "call": rec.index, "policy_version": rec.policy_version}}
        if with_ids:
            out["prompt_token_ids"] = rec.prompt_ids
        return out

    # --- admin --------------------------------------------------------------------------------------
    def update_weights(self, state_dict) -> int:
        """New policy weights, loaded once the running engine call drains; returns the new version."""
        return self.scheduler.update_weights(state_dict)

    def models_list(self) -> dict[str, Any]:
        return {"object": "list", "data": [
            {"id": m, "object": "model", "created": int(self.started), "owned_by": "trajkit",
             "context_length": self.config.reported_context_length or self.max_context,
             "max_model_len": self.max_context}
            for m in self.models]}

    def close(self) -> None:
        self.scheduler.close()


def _degraded(backend, config: GatewayConfig, scheduler: Scheduler) -> list[str]:
    """What this backend cannot do that the config asks for, said once (``Gateway.degraded``, the log)."""
    notes = []
    if config.continuous and not scheduler.continuous:
        notes.append(f"continuous batching off: backend {backend.name!r} has no step-wise sessions "
                     "(Capabilities.sessions); requests are batched into whole generate calls, and one that "
                     "arrives during a call waits for it")
    if config.prefix_cache and not backend.capabilities.prefix_cache:
        reuse = backend.guarantees.prefix_reuse
        notes.append(f"trajkit's exact prefix cache off: backend {backend.name!r} reuses prefixes "
                     + ("with its own cache (cached_tokens not reported)" if reuse == "backend" else "not at all"))
    return notes


def _has_stop(text: str, stop: list[str]) -> bool:
    return any(s in text for s in stop)


def session_seed(seed: int, session: str, call: int) -> int:
    """The seed of call ``call`` of the session named ``session`` (its seed key, else its id:
    :attr:`Session.seed_name`) under ``seed`` (``GatewayConfig.force_seed``, or an RL round's), 63 bits; the
    name enters through a hash that is the same in every process, unlike ``hash(str)``."""
    digest = int.from_bytes(hashlib.blake2b(session.encode(), digest_size=8).digest(), "little")
    return mix(mix(seed, digest), call)
