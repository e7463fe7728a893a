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


def prompt_too_long(prompt_tokens: int, window: int, param: str) -> ApiError:
    """The prompt alone fills the window: vLLM's wording, which harnesses read as *shorten the history*
    (the Hermes Agent and LiteLLM match "maximum context length"; no output budget is named, so none of
    them mistakes it for a max_tokens problem)."""
    return ApiError(f"This model's maximum context length is {window} tokens. However, your request has "
                    f"{prompt_tokens} input tokens. Please reduce the length of the input messages.",
                    param=param, code="context_length_exceeded")


def output_too_long(prompt_tokens: int, max_tokens: int, window: int) -> ApiError:
    """The prompt fits but prompt + ``max_tokens`` does not (``max_tokens_overflow: error``): vLLM's wording
    with the numbers, from which the Hermes Agent computes the room left (window - input tokens) and
    retries with a smaller ``max_tokens`` instead of compressing its history."""
    return ApiError(f"This model's maximum context length is {window} tokens. However, you requested "
                    f"{max_tokens} output tokens and your prompt contains {prompt_tokens} input tokens, for a "
                    f"total of {prompt_tokens + max_tokens} tokens. Please reduce the length of the input "
                    "prompt or the number of requested output tokens.",
                    param="max_tokens", code="context_length_exceeded")
