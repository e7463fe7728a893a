"""Train/eval leaks: exact duplicates, n-gram overlap and MinHash near-duplicates of eval items in train data.

Three checks, each over every eval item against all train items (:mod:`trajkit.audit.items` says which
text of a row is the prompt and which the answer):

``leak.exact``
    SHA-1 of the normalised prompt, and of the normalised prompt + answer; an eval item whose prompt
    hash is a train item's is a leak (FAIL). Normalisation is lm-eval's decontamination one
    (``lm_eval/decontamination/janitor.py``): lower-case, delete ASCII punctuation, split on whitespace.
``leak.ngram``
    Word n-grams of the normalised text, n = 13 as in GPT-3's contamination study (Brown et al. 2020,
    app. C) and lm-eval's decontamination; items of 8-12 words use n = 8 (GPT-3's lower bound); items
    under 8 words are left to ``leak.exact``. Every eval n-gram found in the train set marks its words;
    reported per item: the longest marked span (words) and whether the marks cover the whole answer.
    An item whose answer is covered is a FAIL (the train data holds the question *with* its answer);
    a match on the question alone is a WARN (the task text is there, the answer may not be).
``leak.near``
    Jaccard similarity of 5-word shingle sets (Broder 1997), found with MinHash LSH (``datasketch``,
    128 permutations, LSH at the threshold) and *confirmed by the exact Jaccard* of the two shingle sets,
    so a reported pair is never a MinHash estimate. Jaccard >= 0.8 is a WARN (the threshold of
    near-duplicate detection in Lee et al. 2022, "Deduplicating training data makes language models
    better"). LSH can miss a pair near the threshold (a false negative, never a false positive).

Where we deviate: lm-eval's janitor also strips the n-gram's surrounding text from *train* documents
(it cleans a corpus); this audit only reports. Lexical checks cannot see a paraphrase that changes most
words; a semantic check (embeddings) is not here.
"""
from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass

from trajkit.audit.config import LeakConfig
from trajkit.audit.items import Item
from trajkit.audit.report import Check
from trajkit.errors import InputError

_DELETE = str.maketrans(string.ascii_uppercase, string.ascii_lowercase, string.punctuation)


def normalize_words(text: str) -> list[str]:
    """lm-eval's decontamination normalisation: ASCII lower-case, ASCII punctuation deleted, whitespace split.

    >>> normalize_words("What's 2+2?  Answer: 4.")
    ['whats', '22', 'answer', '4']
    """
    return text.translate(_DELETE).split()


def _flag(flagged: set[Item] | None, item: Item) -> None:
    if flagged is not None:
        flagged.add(item)


def _digest(words: list[str]) -> str:
    return hashlib.sha1(" ".join(words).encode()).hexdigest()


def exact_check(train: list[Item], evals: list[Item], flagged: set[Item] | None = None) -> Check:
    """FAIL when an eval item's normalised prompt (or prompt + answer) equals a train item's; each flagged
    eval item is added to ``flagged`` when given (as for the other two checks)."""
    prompts, full = {}, {}
    for t in train:
        prompts.setdefault(_digest(normalize_words(t.prompt)), t.where)
        full.setdefault(_digest(normalize_words(t.text)), t.where)
    found = []
    for e in evals:
        if not normalize_words(e.text):
            continue  # an empty item equals every other empty item; nothing to leak
        hit = full.get(_digest(normalize_words(e.text)))
        kind = "prompt+answer"
        if hit is None and normalize_words(e.prompt):
            hit, kind = prompts.get(_digest(normalize_words(e.prompt))), "prompt"
        if hit is not None:
            found.append(f"{e.where} = {hit} ({kind})")
            _flag(flagged, e)
    verdict = "FAIL" if found else "PASS"
    return Check("leak.exact", verdict, len(found), 0,
                 f"{len(found)} of {len(evals)} eval items equal a train item after normalisation", found)


@dataclass(frozen=True)
class Overlap:
    """One eval item's n-gram overlap: n used, longest matched span (words), answer fully covered, the
    train item of the first match."""

    n: int
    longest: int
    covers_answer: bool
    train: str


def _ngram_index(train: list[Item], n: int) -> dict[int, str]:
    index: dict[int, str] = {}
    for t in train:
        words = normalize_words(t.text)
        for i in range(len(words) - n + 1):
            index.setdefault(hash(tuple(words[i:i + n])), t.where)
    return index


def _longest_run(flags: list[bool]) -> int:
    best = run = 0
    for f in flags:
        run = run + 1 if f else 0
        best = max(best, run)
    return best


def item_overlap(item: Item, n: int, index: dict[int, str]) -> Overlap | None:
    """The overlap of one eval item with a train n-gram index (None when no n-gram matches)."""
    prompt, answer = normalize_words(item.prompt), normalize_words(item.answer)
    words = prompt + answer
    covered, first = [False] * len(words), None
    for i in range(len(words) - n + 1):
        hit = index.get(hash(tuple(words[i:i + n])))
        if hit is not None:
            covered[i:i + n] = [True] * n
            first = first or hit
    if first is None:
        return None
    return Overlap(n, _longest_run(covered), bool(answer) and all(covered[len(prompt):]), first)


def ngram_check(train: list[Item], evals: list[Item], config: LeakConfig, flagged: set[Item] | None = None) -> Check:
    """FAIL when the matched n-grams of an eval item cover its whole answer, WARN on a prompt-only match."""
    indexes: dict[int, dict[int, str]] = {}
    found, answer_hits, skipped = [], 0, 0
    for e in evals:
        size = len(normalize_words(e.text))
        n = config.ngram if size >= config.ngram else config.short_ngram if size >= config.short_ngram else None
        if n is None:
            skipped += 1
            continue
        if n not in indexes:
            indexes[n] = _ngram_index(train, n)
        o = item_overlap(e, n, indexes[n])
        if o is not None:
            answer_hits += o.covers_answer
            _flag(flagged, e)
            found.append(f"{e.where}: {o.n}-gram span of {o.longest} words from {o.train}"
                         + (", covers the answer" if o.covers_answer else ", question only"))
    verdict = "FAIL" if answer_hits else "WARN" if found else "PASS"
    detail = (f"{len(found)} of {len(evals)} eval items share a {config.ngram}-gram ({config.short_ngram} if shorter) "
              f"with train, {answer_hits} covering the answer; {skipped} items under {config.short_ngram} words "
              "left to leak.exact")
    return Check("leak.ngram", verdict, len(found), 0, detail, found)


def shingles(text: str, k: int) -> set[str]:
    """k-word shingles of the normalised text (the whole text as one shingle when it has fewer words).

    >>> sorted(shingles("a b c d", 3))
    ['a b c', 'b c d']
    """
    words = normalize_words(text)
    if len(words) < k:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i:i + k]) for i in range(len(words) - k + 1)}


def jaccard(a: set, b: set) -> float:
    """|a & b| / |a | b| (0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def near_check(train: list[Item], evals: list[Item], config: LeakConfig, flagged: set[Item] | None = None) -> Check:
    """WARN for each eval item with a train item at exact shingle Jaccard >= ``config.jaccard``."""
    from datasketch import MinHash, MinHashLSH

    def sketch(s: set[str]) -> MinHash:
        m = MinHash(num_perm=config.num_perm, seed=config.minhash_seed)
        m.update_batch([x.encode() for x in sorted(s)])
        return m

    lsh = MinHashLSH(threshold=config.jaccard, num_perm=config.num_perm)
    train_sets = {}
    for i, t in enumerate(train):
        s = shingles(t.text, config.shingle)
        if s:
            train_sets[i] = s
            lsh.insert(i, sketch(s))
    found, best = [], None
    for e in evals:
        s = shingles(e.text, config.shingle)
        if not s:
            continue
        scored = [(jaccard(s, train_sets[i]), i) for i in lsh.query(sketch(s))]
        if scored:
            j, i = max(scored, key=lambda x: (x[0], -x[1]))
            best = j if best is None else max(best, j)
            if j >= config.jaccard:
                found.append(f"{e.where} ~ {train[i].where} (Jaccard {j:.3f})")
                _flag(flagged, e)
    verdict = "WARN" if found else "PASS"
    return Check("leak.near", verdict, len(found), config.jaccard,
                 f"{len(found)} of {len(evals)} eval items have a train item at {config.shingle}-word-shingle "
                 f"Jaccard >= {config.jaccard} (" + (f"highest among LSH candidates: {best:.3f})" if best is not None
                                                      else "no LSH candidate)"), found)


def leak_checks(train: list[Item], evals: list[Item], config: LeakConfig | None = None,
                flagged: set[Item] | None = None) -> list[Check]:
    """The three leak checks of eval items against train items; ``flagged`` collects every eval item any
    of them flags (exact, n-gram on the question or the answer, near-duplicate)."""
    config = config or LeakConfig()
    return [exact_check(train, evals, flagged), ngram_check(train, evals, config, flagged),
            near_check(train, evals, config, flagged)]


def audit_data(train_paths: list[str], eval_paths: list[str] | None, config: LeakConfig | None = None,
               tokenizer_dir: str | None = None, run: str | None = None):
    """``trajkit audit data``: the leak checks over files -> :class:`~trajkit.audit.report.AuditReport`;
    ``tokenizer_dir`` reads token export rows. ``run``: a run folder with ``eval_items.jsonl``; its metric
    is re-computed without the leaked items (``leak.clean_metric``, :mod:`trajkit.audit.clean`), and when
    no ``eval_paths`` are given the run's own eval items are the eval set."""
    from trajkit.audit.items import load_items
    from trajkit.audit.report import AuditReport

    tokenizer = None
    if tokenizer_dir is not None:
        from trajkit.models.load import load_tokenizer

        tokenizer = load_tokenizer(tokenizer_dir, what="--tokenizer")
    train = load_items(train_paths, tokenizer)
    if run is None:
        if not eval_paths:
            raise InputError("no eval data", hint="give --eval FILE..., or --run RUN (its eval_items.jsonl)")
        from trajkit.audit.kinds import kind_check

        kind = kind_check(train_paths, eval_paths)
        return AuditReport(leak_checks(train, load_items(eval_paths, tokenizer), config) + ([kind] if kind else []))
    from trajkit.audit.clean import clean_metric_check, read_eval_items, run_items

    steps = read_eval_items(run)
    evals = load_items(eval_paths, tokenizer) if eval_paths else run_items(steps)
    flagged: set[Item] = set()
    checks = leak_checks(train, evals, config, flagged)
    return AuditReport(checks + [clean_metric_check(run, steps, *leaked_ids(steps[max(steps)], evals, flagged))])


def leaked_ids(rows: list[dict], evals: list[Item], flagged: set[Item]) -> tuple[set[str], int]:
    """The ids of a run's logged eval items (``rows`` of ``eval_items.jsonl``) that are ``flagged`` eval
    items, matched by id (the item's name) else by normalised prompt; and how many rows match no item."""
    by_name = {e.where: e for e in evals}
    by_prompt: dict[str, Item] = {}
    for e in evals:
        by_prompt.setdefault(_digest(normalize_words(e.prompt)), e)
    leaked, unmatched = set(), 0
    for r in rows:
        item = by_name.get(r["id"]) or by_prompt.get(_digest(normalize_words(r["prompt"])))
        if item is None:
            unmatched += 1
        elif item in flagged:
            leaked.add(r["id"])
    return leaked, unmatched
