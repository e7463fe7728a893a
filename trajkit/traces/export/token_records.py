"""Records and settings of the token SFT export: :class:`TokenizeConfig`, the think policies, the
example record (:class:`TokenExample` with :class:`ExampleMeta`), diagnostics, and the typed errors of the
prefix, mask and source checks. The algorithm is in :mod:`trajkit.traces.export.tokenize`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from trajkit.errors import ConfigError, InputError

ThinkPolicy = Literal["keep", "drop", "mask"]
TrainTurns = Literal["auto", "all", "query", "last"]
RenderMode = Literal["auto", "structured", "inline"]
PrefixCheck = Literal["anchored", "full"]
IGNORE_INDEX = -100
ROLES = ("system", "user", "assistant", "tool")
REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
NO_REASONING, INLINE_REASONING = "trajkit_content_without_reasoning", "trajkit_reasoning"  # see sft_render


@dataclass(frozen=True)
class ThinkRule:
    """How a think policy treats earlier turns: strip reasoning before rendering, or mask its tokens."""

    strip_earlier: bool
    mask_earlier: bool


THINK_POLICIES: dict[str, ThinkRule] = {
    "keep": ThinkRule(strip_earlier=False, mask_earlier=False),
    "drop": ThinkRule(strip_earlier=True, mask_earlier=False),
    "mask": ThinkRule(strip_earlier=False, mask_earlier=True),
}


@dataclass
class TokenizeConfig:
    """Settings of the token export; every default is declared here once."""

    max_length: int = 16384
    think_policy: ThinkPolicy = "keep"
    train_turns: TrainTurns = "auto"
    render_mode: RenderMode = "auto"
    windowing: bool = True
    min_trainable_tokens: int = 1
    prefix_check: PrefixCheck = "anchored"
    think_open: str = "<think>"
    think_close: str = "</think>"

    __field_docs__: ClassVar[dict[str, str]] = {
        "max_length": "tokens per example; longer conversations are windowed, never truncated",
        "think_policy": "reasoning of earlier assistant turns: keep, drop (from input) or mask (no loss)",
        "train_turns": "how turns are split into examples: auto (from the template probe), all (one example), "
                       "query (one per user query), last (one per assistant turn)",
        "render_mode": "how traces are written for the template: auto (structured unless it loses something), "
                       "structured (OpenAI fields) or inline (the Hermes text)",
        "windowing": "split long conversations into windows (off: drop examples over max_length)",
        "min_trainable_tokens": "drop examples with fewer trainable tokens",
        "prefix_check": "token prefix check: anchored (re-encode from the last added token) or full",
        "think_open": "opening think tag, for think_policy=mask",
        "think_close": "closing think tag, for think_policy=mask",
    }

    def __post_init__(self) -> None:
        if isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or self.max_length < 1:
            raise ConfigError(f"max_length must be a positive number of tokens, got {self.max_length!r} "
                              "(set e.g. max_length=16384)")
        if self.think_policy not in THINK_POLICIES:
            raise ConfigError(f"think_policy must be one of {sorted(THINK_POLICIES)}, got {self.think_policy!r}")
        if self.train_turns not in ("auto", "all", "query", "last"):
            raise ConfigError(f"train_turns must be auto, all, query or last, got {self.train_turns!r}")
        if self.render_mode not in ("auto", "structured", "inline"):
            raise ConfigError(f"render_mode must be auto, structured or inline, got {self.render_mode!r}")
        if not isinstance(self.min_trainable_tokens, int) or self.min_trainable_tokens < 1:
            raise ConfigError(f"min_trainable_tokens must be an integer >= 1, got {self.min_trainable_tokens!r}")
        if self.prefix_check not in ("anchored", "full"):
            raise ConfigError(f"prefix_check must be 'anchored' or 'full', got {self.prefix_check!r}")
        if not self.think_open or not self.think_close:
            raise ConfigError("think_open and think_close must be non-empty tags (e.g. '<think>', '</think>')")


@dataclass
class ExampleMeta:
    """Where an example comes from: ``turns`` are the trained assistant turns (message indices)."""

    turns: list[int]
    message_start: int          # first message of the window after the system head
    message_end: int            # one past the last message of the window
    window_index: int
    num_windows: int
    trainable_tokens: int
    num_tokens: int
    turn_token_spans: list[tuple[int, int]]  # token range of each trained turn (before think masking)
    tool_calls: int = 0  # source tool calls found in the trained tokens (source check)
    think_words: int = 0  # source think words found in the trained tokens (source check)
    inference_view: bool = False  # prompt and turn encoded apart: the joint encoding merged across them


@dataclass
class TokenExample:
    """One SFT example. ``labels[j]`` is ``input_ids[j]`` on trained assistant tokens, else -100.

    Example (the tiny test tokenizer; user "hi", assistant "ok")::

        tokens:    <|im_start|> user \n  h  i <|im_end|> \n <|im_start|> assistant \n  o  k <|im_end|> \n
        input_ids: [1,   367, 201, 74, 75,   2,  201,   1,   478, 201, 81, 77,  2,  201]
        labels:    [-100 x 10 .......................................,  81, 77,  2,  201]
    """

    input_ids: list[int]
    labels: list[int]
    metadata: ExampleMeta


@dataclass
class Diagnostic:
    """Something left out of the export, with the assistant turns it cost."""

    kind: Literal["turn_too_long", "window_too_long", "below_min_trainable", "no_assistant_turns",
                  "turn_without_prompt", "source_check"]
    turns: list[int]
    detail: str


class PrefixError(InputError):
    """The prefix property fails: a chat template or tokenizer rewrites earlier text (names the message)."""

    def __init__(self, message: str, message_index: int, hint: str | None = None):
        self.message_index = message_index
        super().__init__(message, field=f"messages[{message_index}]", hint=hint)


class TokenMergeError(PrefixError):
    """The rendered text is a string prefix, but its tokens are not: the tokenizer merges across a label
    boundary (a header's ``\\n\\n`` with the turn after it, when the header markers are plain text)."""


class MaskCheckError(InputError):
    """The unmasked tokens of an example do not decode to the rendered assistant turns."""


class SourceCheckError(InputError):
    """A trained assistant turn lacks part of its source turn (reasoning, narration, a tool call)."""
