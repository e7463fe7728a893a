"""``trajkit bench prefix-cache`` end to end at a tiny size (a random byte-vocabulary model saved as a local
folder): replies identical cache on and off, turn 2+ prompts served from the cache by the amount the earlier
calls left, group rows identical with sharing on and off. Speed is never asserted (docs/engine.md has it)."""
import json

from trajkit.cli.main import build_parser
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer


def test_bench_prefix_cache_tiny(tmp_path):
    folder = tmp_path / "model"
    build_model(TinySpec(vocab_size=259, hidden_size=32, max_positions=4096), seed=0, init_scale=5.0).save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    out = tmp_path / "pc.json"
    args = build_parser().parse_args(["bench", "prefix-cache", "--model", str(folder), "--turns", "3",
                                      "--system-tokens", "300", "--max-tokens", "4", "--prompts", "2", "--group", "3",
                                      "--max-new-tokens", "4", "--threads", "1", "--out", str(out)])
    assert args.handler(args) == 0
    res = json.loads(out.read_text())
    s, g = res["session"], res["group"]
    assert s["replies_identical"] and g["rows_identical"]
    on, off = s["cache_on"], s["cache_off"]
    assert [r["prompt_tokens"] for r in on] == [r["prompt_tokens"] for r in off]
    assert on[0]["hit_tokens"] == 0 and all(r["hit_tokens"] == 0 for r in off)
    for r, prev in zip(on[1:], on):  # at least the previous prompt, in full 16-token blocks
        assert r["hit_tokens"] >= prev["prompt_tokens"] // 16 * 16 > 0
        assert r["hit_tokens"] + r["prefill_tokens"] == r["prompt_tokens"]
    assert g["shared"]["prefill_tokens"] * 3 == g["alone"]["prefill_tokens"] == g["alone"]["prompt_tokens"]
