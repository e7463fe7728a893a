"""Stop strings at generation (``SamplingParams.stop_strings``): the engine ends a row at the token that
completes the stop text and samples nothing past it. The reference is the same row sampled without the stop
string (each row has its own seeded stream, so its tokens before the stop are the same) and cut where the
decoded prefix first contains the text (:func:`trajkit.engine.stoptext.first_completing`, every prefix
decoded). Plain, speculative and session decoding; the incremental window against the reference on random
byte sequences with multi-byte characters."""
import random

import pytest

from trajkit.engine import Engine, SamplingParams
from trajkit.engine.drafters import DraftModel
from trajkit.engine.stoptext import StopText, first_completing
from trajkit.errors import ConfigError
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer

from .helpers import perturbed_copy

TOK = byte_tokenizer()
SPEC = TinySpec(vocab_size=259, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=2, intermediate_size=64)
PROMPTS = [TOK.encode(p, add_special_tokens=False) for p in ("Hello there", "ab", "The quick brown fox")]
N = 48


def decode(ids):
    return TOK.decode(ids)


@pytest.fixture(scope="module")
def model():
    return build_model(SPEC, seed=0, init_scale=5.0)


def _stops_from(reference):
    """Per row: a 3-token stop text taken from the middle of the row's own unstopped sample."""
    out = []
    for c in reference:
        ids = c.token_ids
        assert len(ids) == N, "the reference rows run to max_new_tokens"
        out.append(decode(ids[N // 2:N // 2 + 3]))
    return out


@pytest.mark.parametrize("speculative", [False, True])
def test_a_row_stops_at_the_token_completing_its_stop_text(model, speculative):
    drafter = DraftModel(perturbed_copy(model, 0.05, 1)) if speculative else None
    engine = Engine(model, drafter=drafter, num_draft_tokens=3 if speculative else None, decode=decode)
    base = [SamplingParams(temperature=1.0, max_new_tokens=N, seed=7 + i) for i in range(len(PROMPTS))]
    reference = engine.generate(PROMPTS, base)
    stops = _stops_from(reference)
    stopped = engine.generate(PROMPTS, [SamplingParams(temperature=1.0, max_new_tokens=N, seed=7 + i,
                                                       stop_strings=(s, "never-there-Zq9"))
                                        for i, s in enumerate(stops)])
    for ref, got, s in zip(reference, stopped, stops):
        k = first_completing(ref.token_ids, (s,), decode)
        assert k is not None and k <= N // 2 + 3
        assert got.token_ids == ref.token_ids[:k]  # stopped early: k tokens sampled, not N
        assert got.logprobs == pytest.approx(ref.logprobs[:k], abs=1e-6)
        assert got.finish_reason == "stop"
        assert decode(got.token_ids) == decode(ref.token_ids[:k]) and decode(got.token_ids).endswith(s)
        assert s not in decode(got.token_ids[:-1])
    assert stopped.stats.new_tokens < reference.stats.new_tokens


def test_the_session_stops_on_text_too(model):
    engine = Engine(model, decode=decode)
    p = SamplingParams(temperature=1.0, max_new_tokens=N, seed=3)
    ref = engine.generate(PROMPTS[:1], p)[0]
    s = decode(ref.token_ids[10:12])
    session = engine.session()
    session.admit(PROMPTS[:1], [SamplingParams(temperature=1.0, max_new_tokens=N, seed=3, stop_strings=(s,))])
    done = None
    for _ in range(N + 1):
        for u in session.step():
            done = u.done if u.done is not None else done
        if not session.rows:
            break
    k = first_completing(ref.token_ids, (s,), decode)
    assert done is not None and done.token_ids == ref.token_ids[:k] and done.finish_reason == "stop"


def test_a_stop_id_before_the_text_still_ends_the_row(model):
    engine = Engine(model, decode=decode)
    ref = engine.generate(PROMPTS[:1], SamplingParams(temperature=1.0, max_new_tokens=N, seed=5))[0]
    stop_id, text = ref.token_ids[4], decode(ref.token_ids[30:33])
    got = engine.generate(PROMPTS[:1], SamplingParams(temperature=1.0, max_new_tokens=N, seed=5,
                                                      stop_token_ids=(stop_id,), stop_strings=(text,)))[0]
    first = ref.token_ids.index(stop_id)
    k = first_completing(ref.token_ids, (text,), decode)
    assert got.token_ids == ref.token_ids[:min(first + 1, k)]


def test_stop_strings_without_a_decoder_are_refused(model):
    with pytest.raises(ConfigError, match="decode=tokenizer.decode"):
        Engine(model).generate(PROMPTS[:1], SamplingParams(max_new_tokens=4, stop_strings=("ab",)))
    with pytest.raises(ConfigError, match="non-empty strings"):
        SamplingParams(stop_strings=("",))


def test_the_incremental_window_finds_the_references_stop():
    """Random byte tokens (ASCII and the UTF-8 bytes of multi-byte characters, split across tokens) and
    stop texts cut out of their own decode, fed one token or a few at a time: the same k as decoding
    every prefix."""
    rng = random.Random(0)
    pieces = [b"a", b"b", b"\n", b" ", b"U", b":", "é".encode(), "ü€".encode(), "😀".encode()]
    checked = 0
    for trial in range(200):
        data = b"".join(rng.choice(pieces) for _ in range(30))
        ids = TOK.encode(data.decode("utf-8"), add_special_tokens=False)
        text = decode(ids)
        a = rng.randrange(len(text) - 1)
        s = text[a:a + rng.randint(1, 4)]
        k = first_completing(ids, (s,), decode)
        matcher, before, got = StopText((s,), decode), [], None
        while before != ids and got is None:
            new = ids[len(before):len(before) + rng.randint(1, 3)]
            j = matcher.first_stop(before, new)
            got = None if j is None else len(before) + j + 1
            before = before + new
        assert got == k, (trial, s, ids)
        checked += k is not None
    assert checked == 200  # every stop text is in its own sequence
