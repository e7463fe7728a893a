"""SFT export, format (b): token ids and assistant-only labels from any Hugging Face chat template.

Algorithm: prefix rendering. For a conversation ``m[0..n)`` with tools, let ``F = template(m)`` and,
for each assistant turn ``i``, ``P_i = template(m[:i], add_generation_prompt=True)`` and
``E_i = template(m[:i+1])``. Turn ``i``'s text is ``E_i[len(P_i):]`` (its reasoning, narration, tool
calls and end-of-turn glue, e.g. ``<think>..</think>\\n\\n..<|im_end|>\\n``) and its labels are the
tokens ``[len(tok(P_i)), len(tok(E_i)))`` of ``tok(F)``. This is the context the model is given at
inference (the server renders ``m[:i]`` with a generation prompt and the model continues), so the labels
mark exactly what the model must produce. It relies on the PREFIX PROPERTY, which we verify on every
example and never assume: ``P_i`` and ``E_i`` are string prefixes of ``F``, and ``tok(P_i)``,
``tok(E_i)`` equal the first tokens of ``tok(F)``. A template that rewrites earlier turns once later
ones exist (Qwen3 strips reasoning from turns before the last user message) or a tokenizer that merges
tokens across a boundary raises :class:`PrefixError` naming the message. Message-by-message templating
(rendering each message alone and concatenating) is never used: it repeats the tools header or drops
it, splits grouped tool responses into separate turns and changes token merges, so its masks are wrong.

Think policies (what happens to the reasoning of EARLIER assistant turns: every assistant turn of an
example except its last one; the last always keeps its reasoning and is fully trained):

- ``keep``: reasoning stays in the input and in the labels. Right for templates that render history
  verbatim (ChatML/Hermes, like the source data). With a template that strips earlier reasoning the
  prefix check fails and names the turn: use ``drop`` with ``train_turns="last"``.
- ``drop``: reasoning is removed from earlier turns before rendering, so the input holds what a
  stripping template shows at inference; their narration and calls are still trained (teaching those
  turns without a think block). A template that also renders the LAST turn differently from a history
  turn (e.g. Qwen3 adds an empty ``<think></think>`` to the last turn only) still fails the prefix check
  unless ``train_turns="last"`` (one example per assistant turn, only that turn trained: exactly the
  inference view of a stripping template, at the cost of repeating the history in every example).
- ``mask``: reasoning stays in the input as context, but the tokens from ``think_open`` to the end of
  ``think_close`` get label -100 (the glue after ``</think>`` stays trained). Needs a verbatim template
  and think tags that fall on token boundaries (added tokens in Qwen-family tokenizers), else raises.

Windowing (see :mod:`trajkit.traces.export.windowing`): a conversation longer than ``max_length`` becomes
several examples, each the system head plus a run of whole assistant turns with as much preceding
context as fits; a turn that cannot fit alone is dropped and reported, never cut.

Every example passes :func:`check_example`: the decoded unmasked tokens equal the rendered assistant
text exactly. Deviation from TRL's ``assistant_only_loss``: no ``{% generation %}`` markers needed, and
long conversations are windowed rather than truncated. Files: :mod:`trajkit.traces.export.token_export`.

Token prefix check (``prefix_check``): ``anchored`` re-encodes only from the last added token before
each boundary (exact for Hugging Face ``tokenizers``, see :meth:`_Conversation._anchored_counts`),
``full`` re-encodes every prefix (quadratic); failures are always confirmed by full re-encoding.
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trajkit.errors import ConfigError, InputError
from trajkit.traces.export.source_check import SourceTurn, check_turn
from trajkit.traces.export.token_records import (IGNORE_INDEX, INLINE_REASONING, NO_REASONING, REASONING_KEYS, ROLES,
                                          THINK_POLICIES, Diagnostic, ExampleMeta, MaskCheckError, PrefixError,
                                          SourceCheckError, TokenExample, TokenizeConfig, TokenMergeError)
from trajkit.traces.export.windowing import Dropped, Window, common_prefix_len, estimate_costs, iter_windows

_DOC_SECTION = "see trajkit/traces/export/tokenize.py or docs/export.md"


def _validated(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, (list, tuple)) or not messages:
        raise InputError("expected a non-empty list of chat messages", field="messages")
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise InputError(f"message is a {type(msg).__name__}, expected a dict", field=f"messages[{i}]")
        if msg.get("role") not in ROLES:
            raise InputError(f"unknown role {msg.get('role')!r}", field=f"messages[{i}].role",
                             hint=f"expected one of {', '.join(ROLES)}")
    return list(messages)


def _strip_reasoning(msg: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in msg.items() if k not in REASONING_KEYS and k != INLINE_REASONING}
    if NO_REASONING in out:  # inline Hermes text: the think block lives in the content
        out["content"] = out.pop(NO_REASONING)
    return out


def _reasoning(msg: dict[str, Any]) -> str | None:
    for key in (*REASONING_KEYS, INLINE_REASONING):
        if isinstance(msg.get(key), str):
            return msg[key]
    return None


def _snippet(text: str, at: int) -> str:
    return repr(text[max(0, at - 30):at + 30])


@dataclass
class _Rendered:
    """One window rendered in full: its messages, their original indices, text and token ids."""

    window: Window
    messages: list[dict[str, Any]]
    index: list[int]   # local message index -> original index
    text: str
    ids: list[int]
    offsets: list[tuple[int, int]] | None  # char span of each token (fast tokenizers only)


class _Conversation:
    """A validated conversation bound to a tokenizer and a config: renders, encodes and labels windows."""

    def __init__(self, tokenizer, messages: Sequence[dict[str, Any]], tools, config: TokenizeConfig,
                 sources: dict[int, SourceTurn] | None = None, headers: tuple[str, ...] = ()):
        self.tok, self.config = tokenizer, config
        self.sources, self.headers = sources, headers
        self.msgs = _validated(messages)
        self.tools = list(tools) if tools else None
        self.head = 1 if self.msgs[0]["role"] == "system" else 0
        # A turn needs a prompt before it: an assistant message opening a system-less conversation is context.
        self.turns = [i for i, m in enumerate(self.msgs) if m["role"] == "assistant" and i > 0]
        self.min_context = 1 - self.head
        self.rule = THINK_POLICIES[config.think_policy]
        self.fast = bool(getattr(tokenizer, "is_fast", False))
        self.pre: dict[tuple, _Rendered] = {}  # windows rendered and encoded ahead (see tokenize_batch)
        self.added_ids = set(tokenizer.get_added_vocab().values()) if self.fast else set()
        self.merges = False  # set once the tokenizer merged across a label boundary of this conversation

    def render(self, msgs: list[dict[str, Any]], generation_prompt: bool = False, where: int = 0) -> str:
        try:
            return self.tok.apply_chat_template(msgs, tools=self.tools, tokenize=False,
                                                add_generation_prompt=generation_prompt)
        except Exception as exc:  # jinja2 TemplateError, TypeError, ValueError from the template
            raise InputError(f"chat template failed: {type(exc).__name__}: {exc}",
                             field=f"messages[{where}]") from exc

    def encode(self, texts: list[str]) -> list[list[int]]:
        return self.tok(texts, add_special_tokens=False)["input_ids"] if texts else []

    def window_messages(self, w: Window) -> tuple[list[dict[str, Any]], list[int]]:
        index = list(range(self.head)) + list(range(w.start, w.end))
        msgs = [self.msgs[i] for i in index]
        if self.rule.strip_earlier:
            msgs = [_strip_reasoning(m) if m["role"] == "assistant" and i < w.end - 1 else m
                    for m, i in zip(msgs, index)]
        return msgs, index

    def render_window(self, w: Window) -> _Rendered:
        if (w.start, w.end, tuple(w.trainable)) in self.pre:
            return self.pre[(w.start, w.end, tuple(w.trainable))]
        msgs, index = self.window_messages(w)
        text = self.render(msgs, where=w.trainable[-1])
        enc = self.tok(text, add_special_tokens=False, return_offsets_mapping=self.fast)
        return _Rendered(w, msgs, index, text, enc["input_ids"], enc["offset_mapping"] if self.fast else None)

    def label(self, r: _Rendered, spans: list[tuple[int, int]] | None = None,
              counts: dict[int, int] | None = None) -> tuple[TokenExample, list[str]]:
        """Labels of a rendered window by prefix rendering (or the given char ``spans`` of its trained
        turns, and the token ``counts`` at their boundaries when ``r.ids`` were not encoded in one piece);
        verifies the prefix property, the mask and, with sources, the source check."""
        local = [r.index.index(t) for t in r.window.trainable]
        spans = spans or [self._turn_chars(r, i) for i in local]
        thinks = [self._think_chars(r, i, span) for i, span in zip(local, spans)]
        owners = {}
        for i, span, think in zip(local, spans, thinks):
            for c in (*span, *(think or ())):
                owners.setdefault(c, r.index[i])
        counts = counts if counts is not None else self._token_counts(r, owners)
        labels = [IGNORE_INDEX] * len(r.ids)
        expected, token_spans = [], []
        for (cs, ce), think in zip(spans, thinks):
            ts, te = counts[cs], counts[ce]
            labels[ts:te] = r.ids[ts:te]
            token_spans.append((ts, te))
            if think is None:
                expected.append(r.text[cs:ce])
                continue
            labels[counts[think[0]]:counts[think[1]]] = [IGNORE_INDEX] * (counts[think[1]] - counts[think[0]])
            expected.append(r.text[cs:think[0]] + r.text[think[1]:ce])
        trainable = len(labels) - labels.count(IGNORE_INDEX)
        meta = ExampleMeta(list(r.window.trainable), r.window.start, r.window.end, 0, 1, trainable,
                           len(r.ids), token_spans)
        example = TokenExample(list(r.ids), labels, meta)
        check_example(self.tok, example, expected)
        if self.sources is not None:
            self._check_sources(r, local, expected, meta)
        return example, expected

    def _check_sources(self, r: _Rendered, local: list[int], expected: list[str], meta: ExampleMeta) -> None:
        """Each trained turn's text holds its source turn (:mod:`trajkit.traces.export.source_check`)."""
        last = len(r.messages) - 1
        for i, text in zip(local, expected):
            source = self.sources.get(r.index[i])
            if source is None:
                continue
            reasoning = _reasoning(r.messages[i]) is not None and not (self.rule.mask_earlier and i != last)
            result = check_turn(text, source, reasoning, self.headers)
            if result.missing:
                raise SourceCheckError("the trained text of this assistant turn lacks " + "; ".join(result.missing),
                                       field=f"messages[{r.index[i]}]",
                                       hint="the chat template drops it; see `trajkit traces template-info`")
            meta.tool_calls += result.calls_found
            meta.think_words += result.think_words_found

    def _turn_chars(self, r: _Rendered, i: int) -> tuple[int, int]:
        """Char span of local assistant turn ``i`` in the window's text; checks the string prefix property."""
        where = r.index[i]
        assert i > 0, "a trained turn always has a message before it (see _Conversation.turns)"
        prompt = self.render(r.messages[:i], generation_prompt=True, where=where)
        turn = self.render(r.messages[:i + 1], where=where)
        hint = ("the chat template renders earlier turns differently once later messages exist "
                "(e.g. it strips reasoning from history); use train_turns='auto' or 'query' (one example per "
                f"user query) or 'last' ({_DOC_SECTION})")
        for what, text in ((f"up to messages[{where}] (excluded) with a generation prompt", prompt),
                           (f"up to messages[{where}] (included)", turn)):
            if not r.text.startswith(text):
                at = common_prefix_len(text, r.text)
                raise PrefixError(f"rendering the example {what} is not a prefix of the render of the whole "
                                  f"example (first difference at char {at}: {_snippet(text, at)} vs "
                                  f"{_snippet(r.text, at)})", where, hint)
        if not turn.startswith(prompt):
            raise PrefixError("the generation prompt is not how the template starts this assistant turn "
                              f"({_snippet(prompt, len(prompt))} vs {_snippet(turn, len(prompt))})", where,
                              "the template adds something to the last assistant turn only; "
                              "try train_turns='last'")
        return len(prompt), len(turn)

    def label_inference_view(self, r: _Rendered, apart: bool = False) -> tuple[TokenExample, list[str]]:
        """A window whose one trained turn is its last message, labelled as the model meets it: the prompt
        is ``P = template(history, add_generation_prompt=True)`` and the target is the turn as the template
        writes it as the final message. For templates whose prompt is not a prefix of any render that
        includes the turn (Qwen3 adds an empty think block to a trailing assistant message of the prompt),
        and for tokenizers that merge the prompt's end with the turn (then :meth:`_label_apart`; ``apart``
        goes there directly)."""
        i = len(r.messages) - 1
        where = r.index[i]
        prompt = self.render(r.messages[:i], generation_prompt=True, where=where)
        if r.text.startswith(prompt):  # a verbatim template: the turn is what follows the prompt
            turn = r.text[len(prompt):]
        else:
            before = self.render(r.messages[:i], where=where)
            gen = prompt[len(before):] if prompt.startswith(before) else ""
            at = r.text.rfind(gen) if gen else -1
            if at < 0:
                raise PrefixError("the generation prompt does not open this assistant turn in the template's "
                                  "render, so no inference view can be built", where)
            turn = r.text[at + len(gen):]
        if apart:
            return self._label_apart(r, prompt, turn)
        text = prompt + turn
        enc = self.tok(text, add_special_tokens=False, return_offsets_mapping=self.fast)
        view = _Rendered(r.window, r.messages, r.index, text, enc["input_ids"],
                         enc["offset_mapping"] if self.fast else None)
        try:
            return self.label(view, [(len(prompt), len(text))])
        except TokenMergeError:
            self.merges = True
            return self._label_apart(view, prompt, turn)

    def _label_apart(self, r: _Rendered, prompt: str, turn: str) -> tuple[TokenExample, list[str]]:
        """The inference view when the tokenizer merges the prompt's end with the turn (a header's ``\\n\\n``
        and the turn's first characters, when the header markers are plain text): ``tok(prompt)``, encoded
        alone as a server encodes the prompt it is sent, then ``tok(turn)``, the turn's own tokens as the
        model produces them after that prompt; only the latter trained. The gateway records the same."""
        prompt_ids, turn_ids = self.encode([prompt, turn])
        ids = prompt_ids + turn_ids
        view = _Rendered(r.window, r.messages, r.index, prompt + turn, ids, None)
        example, expected = self.label(view, [(len(prompt), len(view.text))],
                                       counts={len(prompt): len(prompt_ids), len(view.text): len(ids)})
        example.metadata.inference_view = True
        return example, expected

    def _think_chars(self, r: _Rendered, i: int, span: tuple[int, int]) -> tuple[int, int] | None:
        """Char range [think_open, end of think_close) to mask in an earlier turn, or None."""
        if not self.rule.mask_earlier or i == len(r.messages) - 1 or _reasoning(r.messages[i]) is None:
            return None
        cs, ce = span
        start = r.text.find(self.config.think_open, cs, ce)
        end = r.text.find(self.config.think_close, max(start, cs), ce) if start >= 0 else -1
        if start < 0 or end < 0:
            raise InputError(f"think_policy='mask' but the rendered turn has no {self.config.think_open}..."
                             f"{self.config.think_close} block", field=f"messages[{r.index[i]}]",
                             hint="set think_open/think_close to the template's tags, or use keep/drop")
        return start, end + len(self.config.think_close)

    def _token_counts(self, r: _Rendered, owners: dict[int, int]) -> dict[int, int]:
        """Token count of ``tok(text[:c])`` for each char boundary c; checks it is a prefix of ``r.ids``.

        ``anchored`` proves most boundaries cheaply (:meth:`_anchored_counts`); the rest, and every
        failure, go through the full re-encoding, so a reported error is always confirmed in full.
        """
        positions = sorted(owners)
        counts = {}
        if self.config.prefix_check == "anchored" and r.offsets is not None:
            counts = self._anchored_counts(r, positions)
        rest = [c for c in positions if c not in counts]
        for c, ids in zip(rest, self.encode([r.text[:c] for c in rest])):
            if ids != r.ids[:len(ids)]:
                k = next((j for j, (a, b) in enumerate(zip(ids, r.ids)) if a != b), min(len(ids), len(r.ids)))
                raise TokenMergeError(
                    f"tokens of the text before char {c} differ from the whole example's tokens at token {k} "
                    f"(the tokenizer merges across the boundary {_snippet(r.text, c)})", owners[c],
                    "labels cannot start or end inside a token: a turn that begins with whitespace merging with "
                    "the template glue does this, or think tags that are not single tokens (think_policy='mask')")
            counts[c] = len(ids)
        return counts

    def _anchored_counts(self, r: _Rendered, positions: list[int]) -> dict[int, int]:
        """Boundaries proven by re-encoding only from the last added token (e.g. ``<|im_start|>``) before them.

        Hugging Face ``tokenizers`` extracts added tokens before normalising and pre-tokenising, and
        encodes the pieces between them independently; so when ``tok(text[a:c])``, ``a`` the start of
        an added token found in ``r.ids``, equals ``r.ids`` from that token on, then ``tok(text[:c])``
        equals ``r.ids[:j + len]``. Keeping the anchor in the tail keeps position rules (Metaspace
        ``prepend_scheme="first"``) as they are in the whole text. Unproven boundaries are left out.
        """
        import numpy as np  # (lazy: the CLI parser imports this module for TokenizeConfig)

        ids = np.asarray(r.ids)
        anchors = np.flatnonzero(np.isin(ids, list(self.added_ids))).tolist() if self.added_ids else []
        ends = [r.offsets[j][1] for j in anchors]
        tails = []
        for c in positions:
            a = bisect_right(ends, c) - 1
            if a >= 0:
                tails.append((c, anchors[a]))
        out = {}
        encoded = self.encode([r.text[r.offsets[j][0]:c] for c, j in tails])
        for (c, j), ids in zip(tails, encoded):
            if ids and ids[0] == r.ids[j] and ids == r.ids[j:j + len(ids)]:
                out[c] = j + len(ids)
        return out

    def estimate_costs(self):
        """Token cost estimates per message for window planning (see :mod:`trajkit.traces.export.windowing`)."""
        if not self.fast:
            raise ConfigError("windowing needs a fast (tokenizers-backed) tokenizer for token offsets; "
                              "use one, or set windowing=False")

        def offsets(text: str) -> list[tuple[int, int]]:
            return self.tok(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]

        strip = _strip_reasoning if self.rule.strip_earlier else None
        return estimate_costs(self.render, offsets, self.msgs, self.head, strip)


def check_example(tokenizer, example: TokenExample, expected_texts: Sequence[str]) -> None:
    """Raise :class:`MaskCheckError` unless exactly the unmasked tokens decode to ``expected_texts``.

    Checks: ``labels`` has the length of ``input_ids``; every label is -100 or its token id; the decoded
    unmasked tokens equal ``"".join(expected_texts)``; the metadata's trainable count is right.
    """
    if len(example.input_ids) != len(example.labels):
        raise MaskCheckError(f"{len(example.input_ids)} input_ids but {len(example.labels)} labels")
    import numpy as np

    ids, labels = np.asarray(example.input_ids), np.asarray(example.labels)
    trained = labels != IGNORE_INDEX
    wrong = np.flatnonzero(trained & (labels != ids))
    if wrong.size:
        raise MaskCheckError(f"labels differ from input_ids at {wrong.size} positions, first {int(wrong[0])}")
    kept = ids[trained].tolist()
    got = tokenizer.decode(kept, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    want = "".join(expected_texts)
    if got != want:
        at = common_prefix_len(got, want)
        raise MaskCheckError(f"unmasked tokens decode to {_snippet(got, at)} but the assistant turns read "
                             f"{_snippet(want, at)} (first difference at char {at})",
                             hint="the tokenizer's decode is not lossless or the labels are misplaced")
    if example.metadata.trainable_tokens != len(kept):
        raise MaskCheckError(f"metadata says {example.metadata.trainable_tokens} trainable tokens, "
                             f"labels have {len(kept)}")


def tokenize_conversation(tokenizer, messages: Sequence[dict[str, Any]], tools: Sequence[dict] | None = None,
                          config: TokenizeConfig | None = None, *,
                          diagnostics: list[Diagnostic] | None = None,
                          sources: dict[int, SourceTurn] | None = None, headers: tuple[str, ...] = (),
                          split: str | None = None) -> list[TokenExample]:
    """Examples of one conversation (OpenAI chat messages + tools), each checked by :func:`check_example`
    and, given the ``sources`` of its assistant messages, by the source check.

    ``split`` resolves ``train_turns="auto"`` (the export passes the template probe's choice; without it
    the probe runs here). Turns left out (too long, too few trainable tokens, failed source check) are
    appended to ``diagnostics`` when given. Raises :class:`PrefixError` / :class:`MaskCheckError` /
    :class:`InputError` naming the message.
    """
    config = config or TokenizeConfig()
    diagnostics = [] if diagnostics is None else diagnostics
    conv = _Conversation(tokenizer, messages, tools, config, sources, headers)
    return _run(conv, _resolve(tokenizer, config, split), diagnostics)


def tokenize_batch(tokenizer, items: Sequence[tuple[Any, Any, dict | None]], config: TokenizeConfig | None = None,
                   *, headers: tuple[str, ...] = (), split: str | None = None
                   ) -> list[tuple[list[TokenExample], list[Diagnostic], InputError | None]]:
    """:func:`tokenize_conversation` over ``(messages, tools, sources)`` items, each giving
    ``(examples, diagnostics, error or None)``. Conversations that fit in one example are rendered first and
    encoded in ONE batch call (a fast tokenizer encodes a batch on all cores); the rest as usual."""
    config = config or TokenizeConfig()
    split = _resolve(tokenizer, config, split)
    convs: list[_Conversation | InputError] = []
    for messages, tools, sources in items:
        try:
            convs.append(_Conversation(tokenizer, messages, tools, config, sources, headers))
        except InputError as exc:
            convs.append(exc)
    if split == "all" and config.windowing:
        _preencode([c for c in convs if isinstance(c, _Conversation) and c.turns])
    out = []
    for conv in convs:
        diagnostics: list[Diagnostic] = []
        try:
            if isinstance(conv, InputError):
                raise conv
            out.append((_run(conv, split, diagnostics), diagnostics, None))
        except InputError as exc:
            out.append(([], diagnostics, exc))
    return out


def _preencode(convs: list[_Conversation]) -> None:
    """Render each conversation's whole window and encode all of them in one batch call."""
    ready = []
    for conv in convs:
        w = Window(conv.head, conv.turns[-1] + 1, conv.turns)
        msgs, index = conv.window_messages(w)
        try:
            ready.append((conv, w, msgs, index, conv.render(msgs, where=w.trainable[-1])))
        except InputError:
            continue  # rendered again, and reported, on the normal path
    if not ready:
        return
    fast = ready[0][0].fast
    enc = ready[0][0].tok([r[4] for r in ready], add_special_tokens=False, return_offsets_mapping=fast)
    for k, (conv, w, msgs, index, text) in enumerate(ready):
        conv.pre[(w.start, w.end, tuple(w.trainable))] = _Rendered(
            w, msgs, index, text, enc["input_ids"][k], enc["offset_mapping"][k] if fast else None)


def _resolve(tokenizer, config: TokenizeConfig, split: str | None) -> str:
    return config.train_turns if config.train_turns != "auto" else (split or auto_split(tokenizer))


def _run(conv: _Conversation, split: str, diagnostics: list[Diagnostic]) -> list[TokenExample]:
    if conv.msgs[0]["role"] == "assistant":
        diagnostics.append(Diagnostic("turn_without_prompt", [0], "messages[0] is an assistant turn with "
                                      "nothing before it to condition on; kept as context only"))
    if not conv.turns:
        diagnostics.append(Diagnostic("no_assistant_turns", [], "conversation has no assistant message"))
        return []
    examples = [ex for ex in _examples(conv, split, diagnostics) if _enough(ex, conv.config, diagnostics)]
    for k, ex in enumerate(examples):
        ex.metadata.window_index, ex.metadata.num_windows = k, len(examples)
    return examples


_SPLITS: dict[str, str] = {}


def auto_split(tokenizer) -> str:
    """The split the template probe chooses for structured messages (cached per chat template text: the
    split depends on the template alone, and a tokenizer's template can be replaced in place)."""
    from trajkit.traces.export.template_probe import probe_template, split_for

    key = str(tokenizer.chat_template)
    if key not in _SPLITS:
        _SPLITS[key] = split_for(probe_template(tokenizer).modes["structured"])
    return _SPLITS[key]


def _enough(ex: TokenExample, config: TokenizeConfig, diagnostics: list[Diagnostic]) -> bool:
    if ex.metadata.trainable_tokens >= config.min_trainable_tokens:
        return True
    diagnostics.append(Diagnostic("below_min_trainable", ex.metadata.turns,
                                  f"{ex.metadata.trainable_tokens} trainable tokens < min_trainable_tokens"))
    return False


def query_groups(msgs: list[dict[str, Any]], turns: list[int]) -> list[list[int]]:
    """Assistant ``turns`` grouped by the user message before them (one group per user query)."""
    groups: dict[int, list[int]] = {}
    last_user = -1
    for i, m in enumerate(msgs):
        if m["role"] == "user":
            last_user = i
        if i in turns:
            groups.setdefault(last_user, []).append(i)
    return list(groups.values())


def _examples(conv: _Conversation, split: str, diagnostics: list[Diagnostic]):
    """Labelled examples (see the module docstring): the conversation's turns as one run (``all``), per
    user query (``query``; a query whose turns fail the prefix check together falls back to one example
    per turn) or one example per turn (``last``)."""
    if split == "query":
        for group in query_groups(conv.msgs, conv.turns):
            yield from _windows(conv, group, None, diagnostics, fallback=True)
    else:
        yield from _windows(conv, conv.turns, 1 if split == "last" else None, diagnostics, fallback=False)


def _windows(conv: _Conversation, turns: list[int], per_window: int | None, diagnostics: list[Diagnostic],
             fallback: bool):
    config = conv.config
    costs = None
    if config.windowing:
        if per_window is None:  # common case first: everything fits in one example, no estimates needed
            whole = conv.render_window(Window(conv.head, turns[-1] + 1, turns))
            if len(whole.ids) <= config.max_length:
                yield from _label(conv, whole, diagnostics, fallback)
                return
        costs = conv.estimate_costs()
    kind = "turn_too_long" if config.windowing else "window_too_long"
    for item in iter_windows(turns, conv.head, config.max_length, conv.render_window, costs, per_window,
                             conv.min_context):
        if isinstance(item, Dropped):
            diagnostics.append(Diagnostic(kind, item.turns, item.detail))
        else:
            yield from _label(conv, item[1], diagnostics, fallback)


def _label(conv: _Conversation, built: _Rendered, diagnostics: list[Diagnostic], fallback: bool):
    """The example of a built window; a failed source check drops it (a diagnostic). A failed prefix check
    retries, with ``fallback``, the window's turns one example each; a one-turn window ending on its turn
    is then labelled in the inference view (:meth:`_Conversation.label_inference_view`). Tokens merging
    across a label boundary always take that path: one inference-view example per turn, whatever the split."""
    trainable = built.window.trainable
    ends_on_turn = len(trainable) == 1 and trainable[-1] == built.index[-1]
    try:
        try:
            if not (conv.merges and ends_on_turn):  # once known to merge, there is no joint encoding to try
                yield conv.label(built)[0]
                return
        except TokenMergeError:
            conv.merges = True
            if len(trainable) > 1:
                yield from _windows(conv, list(trainable), 1, diagnostics, fallback=False)
                return
            if not ends_on_turn:
                raise
        except PrefixError:
            if fallback and len(trainable) > 1:
                yield from _windows(conv, list(trainable), 1, diagnostics, fallback=False)
            elif conv.config.train_turns == "all" or not ends_on_turn:
                raise
            else:
                yield from _fitting(conv, conv.label_inference_view(built)[0], diagnostics)
            return
        yield from _fitting(conv, conv.label_inference_view(built, apart=True)[0], diagnostics)
    except SourceCheckError as exc:
        diagnostics.append(Diagnostic("source_check", list(trainable), str(exc)))


def _fitting(conv: _Conversation, example: TokenExample, diagnostics: list[Diagnostic]):
    """``example`` unless its inference view outgrew ``max_length`` (the window was fitted on the joint
    encoding; encoding apart can add a token at the boundary): then a ``turn_too_long`` diagnostic."""
    if not conv.config.windowing or len(example.input_ids) <= conv.config.max_length:
        yield example
        return
    diagnostics.append(Diagnostic("turn_too_long", list(example.metadata.turns),
                                  f"the inference view of this turn is {len(example.input_ids)} tokens, over "
                                  f"max_length {conv.config.max_length}"))
