"""Small deterministic synthetic corpora for the audit tests: prompt-dataset rows with Zipf-distributed
pseudo-words, so two seeds give two independent corpora with a natural-looking word distribution."""
from __future__ import annotations

import json
import random

SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ta", "vi", "ro", "pe", "du", "gha", "zo", "bri", "ten", "mor", "ax"]


def vocabulary(size: int = 3000) -> list[str]:
    rng = random.Random(1234)  # one shared vocabulary: independence comes from the corpus seed
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))))
    return sorted(words)


VOCAB = vocabulary()
WEIGHTS = [1 / (rank + 1) for rank in range(len(VOCAB))]  # Zipf, s = 1


def sentence(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choices(VOCAB, WEIGHTS, k=rng.randint(lo, hi)))


def corpus(seed: int, n: int, prefix: str) -> list[dict]:
    """``n`` rows ``{"id", "question", "answer"}``: questions of 20-50 words, answers of 3-10 words."""
    rng = random.Random(seed)
    return [{"id": f"{prefix}{i}", "question": sentence(rng, 20, 50).capitalize() + "?",
             "answer": sentence(rng, 3, 10)} for i in range(n)]


def write_jsonl(path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)
