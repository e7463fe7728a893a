"""``trajkit bench gateway`` end to end at a tiny size, mixed lengths and a drafter: every arm's sessions
are recorded and stitched correctly (the bench's own check), request counts add up, the continuous arm
really ran continuous (speculative) batching. Speed is never asserted (docs/gateway.md has the numbers)."""
import json

from trajkit.cli.main import build_parser


def test_bench_gateway_mixed_lengths_with_a_drafter(tmp_path, capsys):
    out = tmp_path / "gw.json"
    args = build_parser().parse_args(["bench", "gateway", "--sessions", "4", "--turns", "2", "--max-tokens", "4",
                                      "--long-tokens", "12", "--drafter", "ngram", "--k", "2", "--out", str(out)])
    assert args.handler(args) == 0
    res = json.loads(out.read_text())
    assert res["drafter"] == "ngram" and res["k"] == 2 and res["long_tokens"] == 12
    arms = res["arms"]
    assert set(arms) == {"continuous", "per-call", "serial"}
    for a in arms.values():
        assert a["sessions_ok"] and a["requests"] == 8
        assert 0 < a["short_p50_s"] <= a["short_p95_s"] and 0 < a["p50_s"] <= a["p95_s"]
    assert arms["continuous"]["continuous"] and not arms["per-call"]["continuous"]
    assert arms["serial"]["rows_per_call"] == 1.0
    assert "short p50" in capsys.readouterr().out
