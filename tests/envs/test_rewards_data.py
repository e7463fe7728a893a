"""TRL-style rewards and prompt datasets: hand-derived totals, None handling, bad rows, disjoint splits."""
import json
import math
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from datasets import Dataset

from trajkit.errors import ConfigError, InputError
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.rl.advantages import group_advantages
from trajkit.envs.data import DatasetTask, read_rows
from trajkit.envs.rewards import RewardSet
from trajkit.envs.sample import Sample
from trajkit.envs.single_turn import ChatArithmeticTask, final_number_correct, last_number

TOK = byte_tokenizer()


def _sample(prompt, completion, columns=None, ids=(1, 2)):
    return Sample([1], list(ids), [-0.1] * len(ids), [1] * len(ids),
                  {"prompt": prompt, "completion": completion, "columns": columns or {}})


def test_trl_reward_functions_run_unchanged():
    from trl.rewards import think_format_reward

    chat = [{"role": "user", "content": "q"}]
    good = _sample(chat, [{"role": "assistant", "content": "<think>\nhm\n</think>\nfour"}])
    bad = _sample(chat, [{"role": "assistant", "content": "four"}])
    totals, metrics = RewardSet.build([think_format_reward])([good, bad])
    assert totals == [1.0, 0.0]
    assert metrics["reward/think_format_reward"] == 0.5


def test_weights_none_and_unscorable_rows():
    calls = {}

    def exact(prompts, completions, completion_ids, answer, log_metric, **kwargs):
        calls["prompts"], calls["ids"] = prompts, completion_ids
        log_metric("seen", len(completions))
        return [float(c == a) if a is not None else None for c, a in zip(completions, answer)]

    def brevity(completions, **kwargs):
        return [None if c == "skip" else -0.25 * len(c) for c in completions]

    rows = [_sample("p0", "4", {"answer": "4"}, ids=(52,)), _sample("p1", "44", {"answer": "4"}),
            _sample("p2", "skip", {"answer": None}), _sample("p3", "skip", {"answer": "9"})]
    totals, metrics = RewardSet.build([exact, brevity], weights=[2.0, 1.0])(rows)
    # by hand: 2*1 - 0.25*1 ; 2*0 - 0.25*2 ; both None -> unscorable ; 2*0 + None -> 0
    assert totals[0] == 1.75 and totals[1] == -0.5 and math.isnan(totals[2]) and totals[3] == 0.0
    assert metrics["reward/exact"] == pytest.approx(1 / 3)  # None left out of the mean
    assert metrics["reward/brevity"] == pytest.approx((-0.25 - 0.5) / 2)
    assert metrics["reward/extra/seen"] == 4
    assert calls["prompts"] == ["p0", "p1", "p2", "p3"] and calls["ids"][0] == [52]
    # the unscorable completion is left out of its group's baseline and gets advantage 0
    adv = group_advantages(torch.tensor([totals]), scale="none")[0].tolist()
    mean = (1.75 - 0.5 + 0.0) / 3
    assert adv == pytest.approx([1.75 - mean, -0.5 - mean, 0.0, 0.0 - mean])


def test_reward_errors_name_the_function():
    rs = RewardSet.build([lambda completions, **k: [1.0]])
    with pytest.raises(ConfigError, match="returned 1 values for 2 completions"):
        rs.compute(["a", "b"], ["x", "y"], [[1], [2]], [{}, {}])

    def nan_reward(completions, **kwargs):
        return [float("nan")] * len(completions)
    with pytest.raises(ConfigError, match="'nan_reward' returned nan for completion 0"):
        RewardSet.build([nan_reward]).compute(["a"], ["x"], [[1]], [{}])
    with pytest.raises(ConfigError, match="2 weights for 1 reward"):
        RewardSet.build([nan_reward], weights=[1, 2])


def _rows(n):
    return [{"prompt": [{"role": "user", "content": f"{i}+1?"}], "answer": str(i + 1)} for i in range(n)]


def test_jsonl_bad_rows_lenient_and_strict(tmp_path):
    path = tmp_path / "prompts.jsonl"
    lines = [json.dumps(r) for r in _rows(3)]
    lines.insert(1, json.dumps({"question": "no prompt"}))
    lines.insert(3, "{not json")
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match=r"prompts.jsonl: skipped 2 of 5 rows; first: .*prompts.jsonl:2: field prompt"):
        rows = read_rows(str(path))
    assert [r["answer"] for r in rows] == ["1", "2", "3"]  # the rows around the bad ones are kept
    with pytest.raises(InputError, match=r"prompts.jsonl:2: field prompt: 'prompt' is missing"):
        read_rows(str(path), strict=True)


def test_parquet_and_dataset_give_the_same_prompts(tmp_path):
    rows = _rows(10)
    path = tmp_path / "p.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    a = DatasetTask(str(path), TOK, eval_fraction=0.3, seed=5)
    b = DatasetTask(Dataset.from_list(rows), TOK, eval_fraction=0.3, seed=5)
    assert [a.prompt(i).ids for i in range(25)] == [b.prompt(i).ids for i in range(25)]
    p = a.prompt(0)
    assert p.text == TOK.apply_chat_template(p.source, tokenize=False, add_generation_prompt=True)
    assert p.columns["answer"] == str(int(p.source[0]["content"].split("+")[0]) + 1)


def test_eval_split_is_disjoint_and_the_same_for_every_seed():
    rows = _rows(40)
    t0, t1 = DatasetTask(rows, TOK, eval_fraction=0.25, seed=0), DatasetTask(rows, TOK, eval_fraction=0.25, seed=1)
    train = {r["answer"] for r in t0.train_rows}
    held = {r["answer"] for r in t0.eval_rows}
    assert len(held) == 10 and not train & held and len(train | held) == 40
    assert t0.eval_rows == t1.eval_rows
    # every train row is visited once per epoch; seeds shuffle differently
    epoch = [t0.prompt(i).columns["answer"] for i in range(30)]
    assert sorted(epoch) == sorted(train)
    assert epoch != [t1.prompt(i).columns["answer"] for i in range(30)]
    with pytest.raises(ConfigError, match="eval split"):
        DatasetTask(rows, TOK).prompt(0, split="eval")


def test_plain_text_prompts_are_tokenized_as_they_are():
    task = DatasetTask([{"prompt": "2+2=", "answer": "4"}], TOK)
    p = task.prompt(0)
    assert p.ids == list(b"2+2=") and not p.conversational


def test_arithmetic_task_checker_and_held_out_pairs():
    assert last_number("Let me see: 3 + 4 = 7.") == "7" and last_number("none") is None
    chat = [{"role": "assistant", "content": "3 + 4 is 7"}]
    assert final_number_correct([chat, "it is 8", "1,000"], ["7", "7", "1000"]) == [1.0, 0.0, 1.0]
    task = ChatArithmeticTask(0, TOK, 1, 9)
    train = {tuple(map(int, task.prompt(i).source[0]["content"][8:].split("?")[0].split(" + ")))
             for i in range(400)}
    held = set(task.splits["eval"])
    assert train == set(task.splits["train"]) and not train & held and len(train) + len(held) == 81
    p = task.prompt(3, split="eval")
    a, b = task.splits["eval"][3]
    assert p.columns["answer"] == str(a + b) and f"What is {a} + {b}?" in p.text


def test_explained_arithmetic_asks_for_steps_on_the_same_pairs_and_answers():
    """``arith_explain`` (config grpo_smollm2_long): prompt i is arith's prompt i (pair, answer, split) with
    the step-by-step question; the packaged config loads it with the longer replies."""
    from trajkit.rl.config import load_config
    from trajkit.envs.registry import make_task

    cfg = load_config("grpo_smollm2_long")
    assert cfg.task.name == "arith_explain" and cfg.rollout.max_new_tokens == 128
    short, long = ChatArithmeticTask(0, TOK, 1, 9), make_task(cfg.task, 0, TOK)
    assert long.splits == short.splits and long.name == "arith_explain"
    for i, split in [(0, "train"), (5, "train"), (3, "eval")]:
        s, e = short.prompt(i, split), long.prompt(i, split)
        a, b = map(int, s.source[0]["content"][8:].split("?")[0].split(" + "))
        assert e.columns == s.columns == {"answer": str(a + b)}
        assert e.source[0]["content"] == (f"What is {a} + {b}? Explain how you add them step by step, "
                                          "then end with the number.")
    with pytest.raises(ConfigError, match="style must be one of"):
        ChatArithmeticTask(0, TOK, 1, 9, style="verbose")


def test_dataset_warns_once_for_lenient_rows():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        task = DatasetTask(_rows(3) + [{"prompt": []}], TOK)
    assert len(seen) == 1 and len(task.train_rows) == 3
