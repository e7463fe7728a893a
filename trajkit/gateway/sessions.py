"""Sessions and per-call records: what the engine consumed and sampled, token for token.

On an open gateway (``trajkit serve``) a session is named by the request's ``x-session-id`` header, else its
API key (``Authorization: Bearer KEY``); a request with neither gets a fresh one-call session ``anon-…``. A
session an environment opens (:meth:`SessionStore.open`) also gets a secret key of its own, bound to it: on a
locked gateway (:mod:`trajkit.gateway.access`) that key is the only way to reach it. A session belongs to the
first model it was used with: the same id with another model is a 409 (two harness runs sharing an id by
mistake would otherwise interleave their records).

Worked example of a record (a chat call whose prompt rendered to ids ``[257, 117, 10, 104, 105, ...]``, one
choice that sampled ``"ok"`` then ``<|im_end|>`` = 258 in the byte vocabulary)::

    CallRecord(index=0, endpoint="chat", prompt_ids=[257, 117, ...],
               choices=[ChoiceRecord(token_ids=[111, 107, 258], logprobs=[-0.1, -0.3, -0.01],
                                     finish_reason="stop", text="ok", message={...})],
               policy_version=0, timing={"queued_s": 0.001, "generate_s": 0.02, "total_s": 0.03})

``prompt_ids`` are what the server rendered and tokenised (never a client's text re-tokenised later);
``token_ids`` what the engine sampled (the stop token included); ``logprobs`` the engine's, one per token.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from trajkit.gateway.errors import ApiError


@dataclass
class ChoiceRecord:
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    text: str  # the completion text the client was given (before parsing into message fields)
    message: dict[str, Any] | None = None  # chat: the assistant message returned
    top_logprobs: list[list[tuple[int, float]]] | None = None  # asked for: (id, log p) per token, most likely first


@dataclass
class CallRecord:
    index: int
    endpoint: str  # "chat" or "completions"
    model: str
    prompt_ids: list[int]
    choices: list[ChoiceRecord]
    policy_version: int
    timing: dict[str, float]
    messages: list[dict[str, Any]] | None = None  # chat: the request's messages (validated)
    tools: list[dict[str, Any]] | None = None
    forced_text: str = ""  # tool_choice required / named: text forced after the prompt (its ids end prompt_ids)
    # the prompt's prefill: {"query_tokens", "hit_tokens" (states from the prefix cache), "new_tokens"
    # (prefilled), "flops_saved" (~ 2 x params x hit_tokens)}
    prefix_cache: dict[str, int] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def record_line(session_id: str, record: CallRecord) -> str:
    """One line of ``records.jsonl`` (the one layout the live ``--save-dir`` log and ``save_sessions`` write)."""
    return json.dumps({"session": session_id, **record.as_dict()}) + "\n"


@dataclass(frozen=True)
class Forced:
    """Sampling a session's requests get whatever they ask (an RL round's: the loss assumes it).
    ``temperature`` replaces the request's (top-k/top-p off); ``seed`` seeds every request, replacing any
    seed it brings (with the session's seed key and the call's index, :func:`trajkit.gateway.service.session_seed`;
    ``GatewayConfig.force_seed`` seeds only the requests that bring none);
    ``max_tokens`` is the budget of a request that gives none."""

    temperature: float | None
    seed: int | None = None
    max_tokens: int | None = None


@dataclass
class Session:
    id: str
    model: str
    records: list[CallRecord] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    texts: list[tuple[str, list[int]]] = field(default_factory=list, repr=False)  # (decoded text, ids)
    calls: int = 0  # requests prepared so far (records count only the finished ones)
    forced: Forced | None = None  # set when the session is opened for an RL round (SessionStore.open)
    tag: object = None  # who its requests are for (an RL round's number): the scheduler's job tag
    key: str | None = field(default=None, repr=False)  # the secret bound to it by SessionStore.open
    seed_key: str | None = None  # the name its forced seeds are drawn under (None: its id; SessionStore.open)

    @property
    def seed_name(self) -> str:
        """What :func:`~trajkit.gateway.service.session_seed` hashes: ``seed_key``, else the session id."""
        return self.id if self.seed_key is None else self.seed_key

    def next_call(self) -> int:
        """The index of a new request in this session (0, 1, ...), counted when it is prepared."""
        with self.lock:
            self.calls += 1
            return self.calls - 1

    def add(self, record: CallRecord) -> CallRecord:
        with self.lock:
            record.index = len(self.records)
            self.records.append(record)
        return record


def bearer(headers) -> str | None:
    """The key of ``Authorization: Bearer KEY``, or None."""
    auth = headers.get("authorization") or ""
    key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    return key or None


def session_id(headers) -> str:
    """The session a request belongs to (see the module docstring)."""
    sid = headers.get("x-session-id")
    if sid:
        return sid.strip()
    return bearer(headers) or "anon-" + uuid.uuid4().hex[:16]


def _bytes(key: str) -> bytes:
    return key.encode("utf-8", "surrogatepass")


def _digest(key: str) -> bytes:
    return hashlib.sha256(_bytes(key)).digest()


class SessionStore:
    """All sessions of a server, thread-safe. Keys are found by their SHA-256 (the table never holds a key
    as its index) and then compared with :func:`hmac.compare_digest`."""

    def __init__(self):
        self._sessions: dict[str, Session] = {}
        self._keys: dict[bytes, Session] = {}  # sha256(key) -> the session the key is bound to
        self._lock = threading.Lock()

    def get(self, sid: str, model: str) -> Session:
        with self._lock:
            s = self._sessions.get(sid)
            if s is None:
                s = self._sessions[sid] = Session(sid, model)
        if s.model != model:
            raise ApiError(f"session {sid!r} was started with model {s.model!r}; one session serves one model "
                           "(use a new x-session-id or API key)", param="model", status=409, code="session_model")
        return s

    def open(self, sid: str, model: str, forced: Forced | None = None, tag: object = None,
             seed_key: str | None = None) -> Session:
        """A new session ``sid`` whose requests are sampled as ``forced`` says (its seeds drawn under
        ``seed_key``, else ``sid``) and tagged ``tag`` (the
        scheduler's :meth:`~trajkit.gateway.scheduler.Scheduler.drain` by tag), with a fresh random ``key``
        (``tk-`` + ``secrets.token_urlsafe``, 192 bits; the prefix keeps a key that would start with ``-`` from
        reading as an option on a harness's command line) bound to it until :meth:`revoke`; an existing one
        is refused."""
        key = "tk-" + secrets.token_urlsafe(24)
        with self._lock:
            if sid in self._sessions:
                raise ValueError(f"session {sid!r} is open already")
            s = self._sessions[sid] = Session(sid, model, forced=forced, tag=tag, key=key, seed_key=seed_key)
            self._keys[_digest(key)] = s
        return s

    def bound(self, key: str) -> Session | None:
        """The session ``key`` is bound to (and not revoked), or None."""
        with self._lock:
            s = self._keys.get(_digest(key))
        return s if s is not None and s.key is not None and hmac.compare_digest(_bytes(s.key), _bytes(key)) else None

    def revoke(self, sids) -> None:
        """Unbind the keys of the sessions ``sids`` (their records stay); a later request with one is refused."""
        with self._lock:
            for sid in sids:
                s = self._sessions.get(sid)
                if s is not None and s.key is not None:
                    self._keys.pop(_digest(s.key), None)
                    s.key = None

    def find(self, sid: str) -> Session | None:
        with self._lock:
            return self._sessions.get(sid)

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._sessions)

    def all(self) -> list[Session]:
        with self._lock:
            return list(self._sessions.values())

