"""``trainer: sft`` (``trajkit train sft_harbor_smollm2``) end to end on the tiny scripted policy: tasks, Oracle
traces from real trials, the token export checked against those traces, a few fine-tuning steps, a policy folder
that loads; and the packaged config resolves without running anything."""
import json

import pytest

from trajkit.cli.main import main
from trajkit.envs.harbor.task import load_task
from trajkit.trainers.sft import SFTConfig, run_sft


def test_sft_trains_only_the_oracle_replies_and_saves_a_loadable_policy(needs_sandbox, policy_folder, tmp_path):
    import torch

    from trajkit.models.load import load_model, load_tokenizer

    out = tmp_path / "run"
    cfg = SFTConfig(model_source="path", model=str(policy_folder), families="write-file,json-sum", train_n=2,
                    heldout_n=0, steps=3, batch_size=2, eval_before=False, threads=1, eval_jobs=2, out_dir=str(out))
    report = run_sft(cfg, log=lambda _line: None)
    assert report["traces"] == {"kept": 4} and report["eval_sft"] is None and len(report["losses"]) == 3
    tokenizer = load_tokenizer(policy_folder)
    traces = {json.loads(line)["id"]: json.loads(line) for line in (out / "oracle.jsonl").read_text().splitlines()}
    rows = [json.loads(line) for line in (out / "tokens.jsonl").read_text().splitlines()]
    assert len(rows) == 4
    for row in rows:  # the trained tokens are the assistant replies of one source trace, and nothing else
        trained = tokenizer.decode([t for t, lab in zip(row["input_ids"], row["labels"]) if lab != -100])
        source = next(t for t in traces.values() if t["messages"][2]["content"] in trained)
        task = load_task(out / "tasks" / "train" / source["id"])
        assert task.instruction not in trained and "exit code:" not in trained
        want = [m["content"] for m in source["messages"] if m["role"] == "assistant"]
        assert trained.replace(tokenizer.eos_token, "").split("\n", 1)[0] in want[0]
        assert all(w in trained for w in want)
    lines = []  # the same config again: every phase is taken from phases.json, nothing reruns
    again = run_sft(cfg, log=lines.append)
    assert lines == [f"sft: {n} already done ({out / 'phases.json'})" for n in ("tasks", "traces", "export", "losses",
                                                                                "eval_sft")]
    assert again["losses"] == report["losses"] and again["traces"] == report["traces"]
    tuned, base = load_model(out / "final"), load_model(policy_folder)
    assert load_tokenizer(out / "final").get_vocab() == tokenizer.get_vocab()
    assert any(not torch.equal(a, b) for a, b in zip(tuned.state_dict().values(), base.state_dict().values()))


def test_the_packaged_config_resolves_and_refuses_unknown_keys(capsys):
    assert main(["train", "sft_harbor_smollm2", "--print-config", "steps=7"]) == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["trainer"] == "sft" and cfg["steps"] == 7 and cfg["model"] == "smollm2-135m-instruct"
    assert main(["train", "sft_harbor_smollm2", "--print-config", "stepz=7"]) == 2
    with pytest.raises(Exception, match="batch_size"):
        SFTConfig(batch_size=0)
