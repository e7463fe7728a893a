"""``ApiError``: a bad request, answered as an OpenAI-style error body naming the field.

    >>> e = ApiError("temperature must be a number >= 0, got -1", param="temperature")
    >>> e.status, e.body()
    (400, {'error': {'message': 'temperature must be a number >= 0, got -1', 'type': 'invalid_request_error', 'param': 'temperature', 'code': None}})
"""
from __future__ import annotations

from trajkit.errors import TrajkitError


class ApiError(TrajkitError):
    """A request the server refuses; ``status`` is the HTTP code (4xx), ``param`` the offending field."""

    def __init__(self, message: str, *, param: str | None = None, status: int = 400,
                 type: str = "invalid_request_error", code: str | None = None):
        super().__init__(message)
        self.message, self.param, self.status, self.type, self.code = message, param, status, type, code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}
