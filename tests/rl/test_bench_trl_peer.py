"""``trajkit bench train --peer trl`` on a tiny local model: TRL's GRPOTrainer runs beside the trajkit arm on
the same prompts with the same settings (read back through ``from_trl``), both are evaluated by one
evaluator (so the step-0 held-out reward, same weights, is identical), and TRL's stages are timed."""
import json

import pytest

from tests.traces.export.test_trl_load import tiny_llama, tok  # noqa: F401  (tok: the tiny tokenizer fixture)
from trajkit.cli.main import build_parser

pytest.importorskip("trl")


def test_peer_trl_runs_beside_trajkit(tok, tmp_path):  # noqa: F811
    folder = tmp_path / "tiny"
    tiny_llama(tok).save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    out = tmp_path / "train.json"
    args = build_parser().parse_args([
        "bench", "train", "--steps", "2", "--seeds", "1", "--out", str(out), "--plot", str(tmp_path / "t.png"),
        "--arm", "trajkit=", "--peer", "trl", "policy.source=path", f"policy.path={folder}", "task.name=copy", "draft.kind=none",
        "draft.distill=false", "shaping.overlong_buffer=0",
        "task.min_len=2", "task.max_len=3", "rollout.prompts_per_step=2", "rollout.group_size=4",
        "rollout.max_new_tokens=6", "optim.lr=1e-3", "optim.micro_batch_size=8", "eval.every=1",
        "eval.num_prompts=4", "threads=1", "log.report_to=[]"])
    assert args.handler(args) == 0
    res = json.loads(out.read_text())
    summary, run = res["summary"], res["runs"][0]
    assert list(summary["arms"]) == ["trajkit", "trl"]
    assert len(run["trl"]["steps"]) == len(run["trajkit"]["steps"]) == 2
    ours, theirs = run["trajkit"]["eval"], run["trl"]["eval"]
    assert [e[0] for e in ours] == [e[0] for e in theirs] == [0, 1, 2]
    assert ours[0][1] == theirs[0][1]  # one evaluator, the same initial weights
    for row in run["trl"]["steps"]:
        assert row["time/generation"] > 0 and row["time/policy_update"] > 0 and row["time/logprob"] >= 0
        assert 0.0 <= row["reward/raw"] <= 1.0 and 1 <= row["length/model_tokens"] <= 6
    assert summary["arms"]["trl"]["step_seconds"] > 0
    assert (tmp_path / "t.png").stat().st_size > 0
