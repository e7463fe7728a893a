"""``trajkit bench cache``: the replay's counting against hand-derived values, and the command end to end on
a bundled sample with SmolLM2's template and a Qwen3-style one (which drops earlier reasoning)."""
import json

import pytest

from tests.traces.templates import QWEN3_STYLE
from trajkit.bench.cache import common_prefix, displaced, replay
from trajkit.cli.main import build_parser

SAMPLE = "trajkit/data/sample/kimi.jsonl.xz"


def test_replay_counts_hits_new_and_displaced_tokens():
    a = list(range(100, 120))  # 20 ids
    calls = [("first", a[:10], a[:14]),  # call 1 leaves a[:14] behind
             ("tool", a[:16], a[:18]),  # hits the 14 it left, 2 new
             ("user", [7] + a[2:18], [7] + a[2:18])]  # an edit at position 0: no hit, but a[2:18] moved by -1
    rows = replay(calls, gram=4, run=8)
    assert [(r["hit"], r["new"]) for r in rows] == [(0, 10), (14, 2), (0, 17)]
    assert rows[0]["displaced"] == 0 and rows[1]["displaced"] == 0  # new ids at their old positions, or unseen
    assert rows[2]["displaced"] == 16  # a[2:18]: seen earlier one position later, one run of 16 >= 8
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2 and common_prefix([], [1]) == 0
    # a run shorter than ``run`` is not counted
    assert displaced([1, 2, 3, 4, 5], 0, {(1, 2, 3, 4): {9}, (2, 3, 4, 5): {10}}, gram=4, run=8) == 0


@pytest.mark.parametrize("template", [None, "qwen3"])
def test_bench_cache_on_a_bundled_sample(tmp_path, smollm2_tokenizer_folder, template):
    out = tmp_path / "cache.json"
    argv = ["bench", "cache", SAMPLE, "--tokenizer", smollm2_tokenizer_folder, "--limit", "1", "--out", str(out)]
    if template:
        path = tmp_path / "qwen3.jinja"
        path.write_text(QWEN3_STYLE)
        argv += ["--chat-template", str(path)]
    args = build_parser().parse_args(argv)
    assert args.handler(args) == 0
    res = json.loads(out.read_text())
    assert res["conversations"] == 1
    for v in res["variants"].values():
        s = v["all"]
        assert s["hit_tokens"] + s["new_tokens"] == s["prompt_tokens"] > 0
        assert v["first"]["calls"] == 1 and v["first"]["hit_tokens"] == 0
        assert sum(v[t]["calls"] for t in ("first", "user", "tool")) == s["calls"]
        assert 0 < s["hit_rate"] < 1
    kept, stripped = res["variants"]["kept"]["tool"], res["variants"]["stripped"]["tool"]
    # stripping a reply's reasoning on the next call breaks the prefix right after the previous prompt
    assert stripped["hit_rate"] < kept["hit_rate"]
