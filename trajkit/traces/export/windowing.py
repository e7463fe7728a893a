"""Windowing for long conversations: split into examples that fit ``max_length`` instead of truncating.

Algorithm. Cut a conversation ``m[0..n)`` (``m[:h]`` the system head, ``h`` in {0, 1}) into windows
``head + m[a:b)``. Each window trains a run of WHOLE assistant turns ``T`` (the trainable run starts at
the first turn not trained yet and ends at the window end ``b``) and keeps, before the run, as much
immediately preceding context ``m[a:s)`` as still fits. Every assistant turn is trained in exactly one
window; turns before the run are context only (label -100). A turn that does not fit even with no
context at all is dropped and reported, never cut.

Windows are planned on token-cost ESTIMATES read off renders of the whole conversation (a message's
cost is the number of tokens its render adds in place; the head's cost is what comes before the first
body message, which may include a few tokens of that message's role glue). Then every window is built
EXACTLY (:func:`fit_window`): too long -> :func:`shrink` (oldest context first, then the last trainable
turn) and rebuild; room left -> :func:`grow` the context once by marginal message costs, which are
exact for templates that render each message independently (ChatML and kin). A turn is dropped only
when its minimal window, built exactly, is too long (or is estimated far too long, see
:func:`exact_margin`). So estimates decide packing, never correctness.

With ``think_policy="drop"`` an assistant turn costs less when it is not the window's last assistant
turn (its reasoning is removed), hence two cost arrays: ``ctx`` (not last) and ``last``.

Worked example (head = system message, 10 tokens; max_length 40)::

    message:  0 sys  1 user  2 asst  3 tool  4 asst  5 tool  6 asst
    cost:      (10)     5      12      8      12       8      12
    window 0: head + m[1:3) trains turn 2 (27 tokens; adding turn 4 would make 42)
    window 1: head + m[3:5) trains turn 4 (30; context m[3] fits, m[2] would not)
    window 2: head + m[5:7) trains turn 6 (30)
"""
from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any


@dataclass
class MessageCosts:
    """Estimated token cost of the head and of each message (indexed like the conversation)."""

    header: int
    ctx: list[int]   # cost of message j as context (an assistant turn that is not the window's last)
    last: list[int]  # cost of message j when it is the window's last assistant turn

    def __post_init__(self) -> None:
        assert len(self.ctx) == len(self.last), (len(self.ctx), len(self.last))
        self._prefix = [0, *accumulate(self.ctx)]

    def window(self, start: int, end: int) -> int:
        """Estimated tokens of ``head + m[start:end)`` whose last message ``end-1`` is an assistant turn."""
        if end <= start:
            return self.header
        return self.header + self._prefix[end - 1] - self._prefix[start] + self.last[end - 1]


@dataclass
class Window:
    """``head + m[start:end)``; ``trainable`` lists the assistant turns trained here (absolute indices)."""

    start: int
    end: int
    trainable: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        assert self.trainable and self.start <= self.trainable[0] and self.trainable[-1] == self.end - 1, self


@dataclass
class Dropped:
    """Assistant turns that no window can hold."""

    turns: list[int]
    detail: str


def token_counts_at(offsets: list[tuple[int, int]], char_positions: list[int]) -> list[int]:
    """For each char position, the number of tokens that start before it (offsets sorted by start)."""
    starts = [s for s, _ in offsets]
    return [bisect_left(starts, c) for c in char_positions]


def costs_from_boundaries(boundary_tokens: list[int]) -> list[int]:
    """Per-message costs from cumulative token counts at message boundaries ``b_0 .. b_n``."""
    return [max(0, boundary_tokens[j + 1] - boundary_tokens[j]) for j in range(len(boundary_tokens) - 1)]


def plan_window(costs: MessageCosts, turns: list[int], k0: int, head_len: int, max_length: int,
                max_turns: int | None = None, min_context: int = 0) -> Window:
    """Greedy window for assistant turns ``turns[k0:]``, planned on the estimates.

    The trainable run starts at ``s = turns[k0]`` (with ``min_context`` messages before it, 1 when there
    is no system head: a turn needs a prompt) and extends over following turns, with the messages
    between them, while the estimate fits, up to ``max_turns`` turns; then context is added backwards
    down to ``head_len`` while it still fits. When even ``turns[k0]`` alone seems too long, that minimal
    window is returned anyway: only an exact build may drop a turn (:func:`fit_window`).
    """
    start = turns[k0] - min_context
    assert start >= head_len, (start, head_len)
    if costs.window(start, turns[k0] + 1) > max_length:
        return Window(start, turns[k0] + 1, [turns[k0]])
    last_k = k0
    for k in range(k0 + 1, len(turns)):
        if max_turns is not None and k - k0 + 1 > max_turns:
            break
        if costs.window(start, turns[k] + 1) > max_length:
            break
        last_k = k
    end = turns[last_k] + 1
    while start > head_len and costs.window(start - 1, end) <= max_length:
        start -= 1
    return Window(start, end, list(turns[k0:last_k + 1]))


def shrink(window: Window, costs: MessageCosts, excess: int, min_context: int = 0) -> Window | None:
    """A smaller window after an exact build came out ``excess`` tokens too long; None if nothing is left.

    Context goes first (oldest message first) until the estimate drops by ``excess``; with no context
    left, the last trainable turn moves out (it will start the next window).
    """
    assert excess > 0, excess
    first = window.trainable[0] - min_context
    start, saved = window.start, 0
    while start < first and saved < excess:
        saved += costs.ctx[start]
        start += 1
    if start > window.start:
        return Window(start, window.end, window.trainable)
    if len(window.trainable) == 1:
        return None
    trainable = window.trainable[:-1]
    return Window(window.start, trainable[-1] + 1, trainable)


def grow(window: Window, costs: MessageCosts, head_len: int, free: int) -> Window:
    """Add preceding context messages whose marginal cost estimates fit in ``free`` exact tokens."""
    start = window.start
    while start > head_len and costs.ctx[start - 1] <= free:
        free -= costs.ctx[start - 1]
        start -= 1
    return window if start == window.start else Window(start, window.end, window.trainable)


def fit_window(window: Window, build: Callable[[Window], Any], max_length: int,
               costs: MessageCosts | None, head_len: int, min_context: int) -> tuple[Window, Any] | None:
    """Build ``window`` exactly; shrink it while too long, and grow its context once when room is left.

    Growing uses only marginal message costs against the exact free room, so a constant error in the
    head estimate (template glue) cannot leave usable context out.
    """
    may_grow = costs is not None
    built = build(window)
    while window is not None:
        free = max_length - len(built.ids)
        if free < 0:
            window, may_grow = shrink(window, costs, -free, min_context) if costs is not None else None, False
        elif may_grow and (bigger := grow(window, costs, head_len, free)) is not window:
            window, may_grow = bigger, False
        else:
            return window, built
        built = build(window) if window is not None else None
    return None


def exact_margin(max_length: int) -> int:
    """Estimates this far over ``max_length`` drop a turn without an exact build (2%, at least 64 tokens).

    Estimates err by a few tokens of template glue; closer calls are always built exactly. This keeps a
    head longer than ``max_length`` (every turn dropped) from costing one full build per turn.
    """
    return max(64, max_length // 50)


def iter_windows(turns: list[int], head_len: int, max_length: int, build: Callable[[Window], Any],
                 costs: MessageCosts | None = None, max_turns: int | None = None,
                 min_context: int = 0) -> Iterator[tuple[Window, Any] | Dropped]:
    """Yield ``(window, build(window))`` for consecutive runs of turns, or :class:`Dropped`.

    ``build`` renders a window exactly and returns an object with ``ids``. Without ``costs`` (windowing
    off) a window is the whole history before its turns, and it is dropped when too long.
    """
    k = 0
    while k < len(turns):
        if costs is None:
            n = len(turns) - k if max_turns is None else max_turns
            window = Window(head_len, turns[k + n - 1] + 1, list(turns[k:k + n]))
        else:
            window = plan_window(costs, turns, k, head_len, max_length, max_turns, min_context)
            if costs.window(window.start, window.end) > max_length + exact_margin(max_length):
                yield Dropped([turns[k]], _drop_detail(costs, [turns[k]], head_len, max_length, min_context))
                k += 1
                continue
        fitted = fit_window(window, build, max_length, costs, head_len, min_context)
        if fitted is None:
            dropped = window.trainable if costs is None else [turns[k]]  # exact: its minimal window overflows
            yield Dropped(dropped, _drop_detail(costs, dropped, head_len, max_length, min_context))
            k += len(dropped)
            continue
        yield fitted
        k += len(fitted[0].trainable)


def _drop_detail(costs: MessageCosts | None, turns: list[int], head_len: int, max_length: int,
                 min_context: int) -> str:
    if costs is None:
        return f"example over max_length {max_length} with windowing off"
    need = costs.window(max(head_len, turns[0] - min_context), turns[0] + 1)
    return (f"assistant turn at messages[{turns[0]}] does not fit in max_length {max_length} even without "
            f"earlier context (about {need} tokens, of which {costs.header} for the system head and tools)")


def common_prefix_len(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings (binary search over C-level comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


Render = Callable[..., str]          # render(messages, where=i) -> text of the whole chat
Offsets = Callable[[str], list[tuple[int, int]]]


def estimate_costs(render: Render, offsets: Offsets, msgs: list[dict[str, Any]], head_len: int,
                   strip: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> MessageCosts:
    """Per-message token costs read off renders of the whole conversation (``strip``: drop policy)."""
    header, last = _boundary_costs(render, offsets, msgs, head_len)
    if strip is None:
        return MessageCosts(header, last, last)
    stripped = [strip(m) if m.get("role") == "assistant" else m for m in msgs]
    return MessageCosts(header, _boundary_costs(render, offsets, stripped, head_len)[1], last)


def _boundary_costs(render: Render, offsets: Offsets, msgs: list[dict[str, Any]],
                    head_len: int) -> tuple[int, list[int]]:
    """(head tokens, cost of each message): token counts at the char boundaries between messages.

    A message's boundary is where the render of the messages before it stops agreeing with the whole
    render; the head ends where two probe renders (head + a user message "a" / "b") part.
    """
    full = render(msgs)
    probes = [render(msgs[:head_len] + [{"role": "user", "content": c}]) for c in ("a", "b")]
    chars = [common_prefix_len(*probes)]
    chars += [common_prefix_len(render(msgs[:j], where=j - 1), full) for j in range(head_len + 1, len(msgs))]
    chars.append(len(full))
    tokens = token_counts_at(offsets(full), chars)
    return tokens[0], [0] * head_len + costs_from_boundaries(tokens)
