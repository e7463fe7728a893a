"""``trajkit bench train`` with arms of one's own (``--arm``), on the toy config: each arm really runs its
overrides (LoGRA's sketched weights have no ``.grad``, so its logged grad norm differs from AdamW's on the
same batch), both share the seed's prompts (the first step's rewards agree), and the summary has every
arm's reward curve. Malformed ``--arm`` values fail before any model loads."""
import json

import pytest

from trajkit.bench.train import parse_arms
from trajkit.cli.main import build_parser


def test_custom_arms_run_side_by_side(tmp_path):
    out = tmp_path / "train.json"
    args = build_parser().parse_args(["bench", "train", "--steps", "2", "--seeds", "1", "--out", str(out),
                                      "--plot", str(tmp_path / "train.png"), "--arm", "adamw=optim.name=adamw",
                                      "--arm", "logra=optim.name=logra optim.logra_rank=8", "eval.every=1"])
    assert args.handler(args) == 0
    res = json.loads(out.read_text())
    assert list(res["summary"]["arms"]) == ["adamw", "logra"]
    adamw, logra = res["runs"][0]["adamw"]["steps"], res["runs"][0]["logra"]["steps"]
    assert adamw[0]["reward/raw"] == logra[0]["reward/raw"]  # same seed, same weights: same first rollouts
    assert adamw[0]["loss/grad_norm"] != logra[0]["loss/grad_norm"]
    for arm in ("adamw", "logra"):
        curve = res["summary"]["reward"][arm]["curve"]
        assert [c[0] for c in curve] == [0, 1, 2] and all(len(c) == 3 for c in curve)
    assert (tmp_path / "train.png").stat().st_size > 0


@pytest.mark.parametrize("spec, message", [("no-equals", "expected NAME="), ("a b=x=1", "plain word"),
                                           ("a=optim.lr", "not a key=value")])
def test_malformed_arms_are_refused(spec, message):
    with pytest.raises(SystemExit, match=message):
        parse_arms([spec])
    assert list(parse_arms([], no_fixed=True)) == ["plain", "spec"]
    with pytest.raises(SystemExit, match="given twice"):
        parse_arms(["a=x=1", "a=y=2"])


def _step(gen: float, other: float, accept: float) -> dict:
    from trajkit.rl.stages import GENERATION, STAGES

    row = {f"time/{k}": (gen if k == GENERATION else other) for k in STAGES}
    return {**row, "gen/acceptance_length": accept, "reward/raw": 0.5, "length/model_tokens": 10}


def test_summary_ratios_against_plain_and_acceptance_per_step_are_hand_derived():
    """Two seeds, three steps (the first, warm-up, is left out of the seconds): plain's generation 6 s vs
    an arm's 3 s is 2x; the step (6 + 4 x 1 s vs 3 + 4 x 1.5 s) is 10 / 9; acceptance per step is the mean
    over seeds, warm-up included."""
    from trajkit.bench.train import summarize, table
    from trajkit.rl.stages import STAGES

    def record(accepts):
        return {"plain": {"steps": [_step(99, 99, 1.0)] + [_step(6, 1, 1.0)] * 2, "eval": []},
                "frozen": {"steps": [_step(99, 99, accepts[0])] + [_step(3, 1.5, a) for a in accepts[1:]],
                           "eval": []}}

    summary = summarize([record([2.0, 1.8, 1.6]), record([2.2, 1.6, 1.2])])
    others = len(STAGES) - 1
    assert summary["vs_plain"]["frozen"]["generation"] == pytest.approx(2.0)
    assert summary["vs_plain"]["frozen"]["step"] == pytest.approx((6 + others) / (3 + 1.5 * others))
    assert summary["acceptance_length"]["frozen"] == pytest.approx([2.1, 1.7, 1.4])
    text = table(summary)
    assert "accept/step frozen     2.10 1.70 1.40" in text and "accept/step plain" not in text
    assert "vs plain frozen       step" in text
