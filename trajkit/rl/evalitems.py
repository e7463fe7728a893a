"""Per-item evaluation logs: each eval item's id, text and scores, every evaluation, in ``eval_items.jsonl``.

A run's ``eval/reward`` is one mean over ``eval.num_prompts`` items x ``eval.samples`` samples. To
re-compute it on a subset (``trajkit audit data --run RUN`` drops the eval items found in the train data)
the run must say which item scored what. :func:`item_rows` groups the evaluation's scored samples by
prompt; the trainer appends them (:func:`append_eval_items`) after every evaluation it logs.

One line per item and evaluation, e.g. for the arith task at step 4::

    {"step": 4, "id": "eval:3", "prompt": "What is 2 + 7? Answer with only the number.", "answer": "9",
     "scores": [1.0, 0.0, 1.0]}

``id`` is the row's own ``id`` column when the task's rows have one (dataset tasks), else ``eval:INDEX``
(the item's index in the eval split, the same for every run seed). ``prompt`` is the text a person wrote,
not the chat-template render: the user turns of a conversational prompt. ``scores`` holds one reward per
sample (``null`` where the reward is NaN, e.g. a sample excluded from scoring); the mean over every
non-null score of one step is that step's ``eval/reward``.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence

from trajkit.envs.base import Prompt

EVAL_ITEMS_FILE = "eval_items.jsonl"


def prompt_text(prompt: Prompt) -> str:
    """The user-written text of a prompt: its user turns (conversational), else its text."""
    if isinstance(prompt.source, list):
        return "\n".join(m["content"] for m in prompt.source
                         if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str))
    return prompt.source if isinstance(prompt.source, str) else prompt.text


def item_rows(step: int, prompts: Sequence[Prompt], rewards: Sequence[float]) -> list[dict]:
    """One row per distinct eval prompt (in first-seen order) with the rewards of all its samples;
    ``prompts[i]`` is the prompt of the sample scored ``rewards[i]``."""
    if len(prompts) != len(rewards):
        raise ValueError(f"{len(prompts)} prompts but {len(rewards)} rewards")
    rows: dict[int, dict] = {}
    for p, r in zip(prompts, rewards):
        if p.index not in rows:
            own = p.columns.get("id")
            answer = p.columns.get("answer")
            rows[p.index] = {"step": step, "id": str(own) if own is not None and str(own) else f"eval:{p.index}",
                             "prompt": prompt_text(p), "answer": answer if isinstance(answer, str) else None,
                             "scores": []}
        rows[p.index]["scores"].append(None if math.isnan(r) else float(r))
    return list(rows.values())


def append_eval_items(out_dir: str, step: int, prompts: Sequence[Prompt], rewards: Sequence[float]) -> str:
    """Append one evaluation's item rows to ``out_dir/eval_items.jsonl``; returns the path."""
    path = os.path.join(out_dir, EVAL_ITEMS_FILE)
    with open(path, "a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(row) + "\n" for row in item_rows(step, prompts, rewards))
    return path
