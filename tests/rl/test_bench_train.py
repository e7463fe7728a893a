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
