"""Who may call which route: one gate in front of every route of the app (:func:`trajkit.gateway.app.create_app`).

Routes fall in three classes, by path, and the class decides what a request must carry:

- **inference** (:data:`INFERENCE`: ``/v1/chat/completions``, ``/v1/completions``, ``/inference/v1/generate``,
  ``/v1/models``): the gate names the request's session, and the handler gets that name from the gate only;
- **public** (:data:`PUBLIC`: ``/health``, ``/api/show``): anyone (a locked gateway's ``/health`` says only
  ``status``);
- **management**: every other route (``/metrics``, ``/trajkit/sessions…``, and any route added later):
  whatever reads across sessions.

An **open** gateway (``trajkit serve``'s default) lets everything through and names the session as
:func:`~trajkit.gateway.sessions.session_id` does (``x-session-id``, else the Bearer key); with a shared
``api_key`` (``trajkit serve --api-key KEY``) every route but the public ones needs ``Bearer KEY`` (401
without it), and the session is ``x-session-id`` (else a fresh ``anon-…``: the key names no session). A **locked**
gateway (the one :class:`trajkit.envs.agent.GatewayEnv` serves its harnesses on) checks, in this order:

1. a management route needs ``Authorization: Bearer ADMIN`` (:attr:`Access.admin_token`, random per gateway and
   held in process only): with a session's key 403, with no key or any other 401;
2. an inference route needs a Bearer key bound to a session (:meth:`~trajkit.gateway.sessions.SessionStore.open`
   mints one per session): without one, or with an unknown or revoked one, 401. The session is the one the
   key is bound to; an ``x-session-id`` naming another is refused with 403 (and adds nothing anywhere).

Example (a locked gateway with sessions ``run-1-0`` and ``run-1-1``, keys ``KA`` and ``KB``): ``Bearer KA``
lands in ``run-1-0``; ``Bearer KA`` with ``x-session-id: run-1-1`` is 403; ``Bearer run-1-1`` is 401;
``GET /trajkit/sessions`` with ``Bearer KA`` is 403.
"""
from __future__ import annotations

import hmac
import secrets

from trajkit.gateway.errors import ApiError
from trajkit.gateway.sessions import SessionStore, bearer, session_id

INFERENCE = frozenset({"/v1/chat/completions", "/v1/completions", "/inference/v1/generate", "/v1/models"})
PUBLIC = frozenset({"/health", "/api/show"})


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


class Access:
    """The gate of one gateway over ``sessions``: open, or locked with a fresh ``admin_token``."""

    def __init__(self, sessions: SessionStore, locked: bool = False, api_key: str | None = None):
        self.sessions, self.locked = sessions, locked
        self.api_key = api_key or None  # open gateway: the one key every caller must bring (None: no key)
        self.admin_token = secrets.token_urlsafe(32) if locked else self.api_key

    def admin(self, headers) -> bool:
        """Whether the request may read across sessions (open gateway without a key, or the admin token)."""
        if self.admin_token is None:
            return True
        key = bearer(headers)
        return key is not None and _same(key, self.admin_token)

    def check(self, path: str, headers) -> str | None:
        """The session an inference request belongs to; None for the other routes; raises
        :class:`~trajkit.gateway.errors.ApiError` (401/403) for a request the gateway refuses."""
        if path in INFERENCE:
            return self.session(headers)
        if path in PUBLIC or self.admin(headers):
            return None
        key = bearer(headers)
        if key is None or self.sessions.bound(key) is None:
            raise ApiError("this route needs the gateway's admin token (Authorization: Bearer TOKEN)",
                           param="authorization", status=401, type="authentication_error", code="unauthorized")
        raise ApiError("this route reads across sessions: a session's key cannot call it", param="authorization",
                       status=403, type="permission_error", code="forbidden")

    def session(self, headers) -> str:
        """The request's session id (module docstring)."""
        if not self.locked and self.api_key is None:
            return session_id(headers)
        if not self.locked:
            if not self.admin(headers):
                raise ApiError("this server needs its API key (Authorization: Bearer KEY, trajkit serve --api-key)",
                               param="authorization", status=401, type="authentication_error",
                               code="invalid_api_key")
            return session_id({"x-session-id": headers.get("x-session-id") or ""})
        key = bearer(headers)
        bound = self.sessions.bound(key) if key is not None else None
        if bound is None:
            raise ApiError("no session is bound to this API key (Authorization: Bearer KEY, the key the run was "
                           "given)", param="authorization", status=401, type="authentication_error",
                           code="invalid_api_key")
        named = (headers.get("x-session-id") or "").strip()
        if named and named != bound.id:
            raise ApiError("x-session-id names another session than the one this API key is bound to",
                           param="x-session-id", status=403, type="permission_error", code="forbidden")
        return bound.id
