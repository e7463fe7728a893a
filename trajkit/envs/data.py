"""Prompt datasets as TRL takes them: a ``datasets.Dataset``, JSONL or Parquet with a ``prompt`` column.

A row's ``prompt`` is either *conversational*, a list of chat messages ``[{"role": "user", "content":
"..."}]`` rendered by the policy tokenizer's chat template with the generation prompt on, or *plain* text
tokenized as it is. Every other column (``answer``, ``solution``, ...) is passed to the reward functions
as a keyword argument, one value per completion, as TRL's ``GRPOTrainer`` does.

Bad rows: by default (lenient) a row without a usable ``prompt`` is skipped and counted, with one warning
naming the file, the first bad row and the field; ``strict=True`` raises :class:`InputError` for it
instead. The rows around it are kept either way.

The eval split is ``eval_dataset`` when given, else the last ``eval_fraction`` of the rows after a fixed
shuffle (seed 0, so every run seed holds out the same rows); the train and eval splits never share a row.

>>> from datasets import Dataset
>>> from trajkit.models.tokenizer import byte_tokenizer
>>> ds = Dataset.from_list([{"prompt": [{"role": "user", "content": f"{i}+1?"}], "answer": str(i + 1)}
...                         for i in range(10)])
>>> task = DatasetTask(ds, byte_tokenizer(), eval_fraction=0.2)
>>> len(task.train_rows), len(task.eval_rows)
(8, 2)
>>> p = task.prompt(0)
>>> p.text.endswith("<|im_start|>assistant\\n"), p.columns["answer"] == str(int(p.source[0]["content"][0]) + 1)
(True, True)
"""
from __future__ import annotations

import json
import os
import random
import warnings
from typing import Any, Sequence

from trajkit.errors import ConfigError, InputError
from trajkit.models.chat import render
from trajkit.envs.rewards import RewardFunc
from trajkit.envs.base import Prompt, encode
from trajkit.envs.single_turn import SingleTurnEnv

EVAL_SHUFFLE_SEED = 0


def _check_prompt(prompt: Any) -> str | None:
    """Why ``prompt`` is not a usable prompt, or None."""
    if isinstance(prompt, str):
        return None if prompt else "is an empty string"
    if not isinstance(prompt, list) or not prompt:
        return f"must be a string or a non-empty list of chat messages, got {type(prompt).__name__}"
    for i, m in enumerate(prompt):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            return f"message {i} must be an object with a 'role' string"
        if m.get("content") is not None and not isinstance(m["content"], str):
            return f"message {i}: 'content' must be a string"
    return None


def read_rows(source: Any, what: str = "dataset", strict: bool = False) -> list[dict]:
    """Rows of a ``datasets.Dataset``, a list of dicts, or a ``.jsonl``/``.json``/``.parquet`` file, each
    with a valid ``prompt``; bad rows skipped (lenient) or raised (strict), see the module docstring."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        numbered, where = _read_file(path), path
    else:
        numbered, where = list(enumerate(source, 1)), what
    good, bad = [], []
    for n, row in numbered:
        if isinstance(row, InputError):
            if strict:
                raise row
            bad.append(row)
            continue
        problem = "is missing" if not isinstance(row, dict) or "prompt" not in row else _check_prompt(row["prompt"])
        if problem is None:
            good.append(dict(row))
            continue
        err = InputError(f"'prompt' {problem}; give each row a prompt (text, or a list of "
                         "{role, content} messages)", path=where, row=n, field="prompt")
        if strict:
            raise err
        bad.append(err)
    if bad:
        warnings.warn(f"{where}: skipped {len(bad)} of {len(numbered)} rows; first: {bad[0]}", stacklevel=2)
    if not good:
        raise InputError(f"no usable rows (of {len(numbered)}); each needs a 'prompt' column", path=where)
    return good


def _read_file(path: str) -> list[tuple[int, Any]]:
    """``(row number, row)`` pairs; JSONL rows are numbered by line, an unreadable line is an InputError."""
    if not os.path.exists(path):
        raise ConfigError(f"dataset file {path!r} does not exist")
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        return list(enumerate(pq.read_table(path).to_pylist(), 1))
    if not path.endswith((".jsonl", ".json")):
        raise ConfigError(f"dataset file {path!r}: use .jsonl, .json or .parquet (or pass a datasets.Dataset)")
    rows: list = []
    with open(path, encoding="utf-8") as fh:
        if path.endswith(".json"):
            data = json.load(fh)
            if not isinstance(data, list):
                raise InputError("a .json dataset must hold a list of rows", path=path)
            return list(enumerate(data, 1))
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rows.append((n, json.loads(line)))
            except json.JSONDecodeError as exc:
                rows.append((n, InputError(f"not valid JSON ({exc.msg}, column {exc.colno})", path=path, row=n,
                                           field="line")))
    return rows


class DatasetTask:
    """A single-turn task over dataset rows; see the module docstring. Prompt ``i`` of the train split is
    row ``order[i % n]``, ``order`` a fresh shuffle (by run seed and epoch) every pass over the rows."""

    name = "dataset"

    def __init__(self, train, tokenizer, eval=None, *, seed: int = 0, eval_fraction: float = 0.0,
                 reward_funcs: Sequence[RewardFunc] = (), strict: bool = False, shuffle: bool = True):
        rows = read_rows(train, "train_dataset", strict)
        if eval is not None:
            self.train_rows, self.eval_rows = rows, read_rows(eval, "eval_dataset", strict)
        else:
            if not 0.0 <= eval_fraction < 1.0:
                raise ConfigError(f"task.eval_fraction must be in [0, 1), got {eval_fraction}")
            order = list(range(len(rows)))
            random.Random(EVAL_SHUFFLE_SEED).shuffle(order)
            n_eval = int(round(len(rows) * eval_fraction))
            if eval_fraction > 0 and (n_eval == 0 or n_eval == len(rows)):
                raise ConfigError(f"task.eval_fraction {eval_fraction} of {len(rows)} rows leaves an empty split")
            keep = sorted(order[:len(rows) - n_eval])
            held = sorted(order[len(rows) - n_eval:])
            self.train_rows, self.eval_rows = [rows[i] for i in keep], [rows[i] for i in held]
        self.tokenizer, self.seed, self.shuffle = tokenizer, seed, shuffle
        self.env = SingleTurnEnv(tokenizer)
        self.reward_funcs = list(reward_funcs)
        self._orders: dict[int, list[int]] = {}

    def _row_index(self, index: int, split: str) -> int:
        """The position in its split's rows of stream prompt ``index`` (train: epoch by epoch, shuffled)."""
        if split == "eval":
            if not self.eval_rows:
                raise ConfigError("evaluation needs an eval split: pass eval_dataset, set task.eval_path or "
                                  "task.eval_fraction > 0")
            return index % len(self.eval_rows)
        n = len(self.train_rows)
        epoch, pos = divmod(index, n)
        if not self.shuffle:
            return pos
        if epoch not in self._orders:
            order = list(range(n))
            random.Random(f"dataset:{self.seed}:{epoch}").shuffle(order)
            self._orders = {epoch: order}  # one epoch at a time is all a stream needs
        return self._orders[epoch][pos]

    def _row(self, index: int, split: str) -> dict:
        return (self.eval_rows if split == "eval" else self.train_rows)[self._row_index(index, split)]

    def prompt(self, index: int, split: str = "train") -> Prompt:
        """Stream prompt ``index`` of ``split``; ``meta["row"]`` is its row in the split (the trainer logs
        the train rows each step as ``data/rows``, so ``trajkit audit run`` can check every row is seen
        once per epoch)."""
        row_index = self._row_index(index, split)
        row = (self.eval_rows if split == "eval" else self.train_rows)[row_index]
        source = row["prompt"]
        if isinstance(source, list):
            text = render(self.tokenizer, source, row.get("tools"), add_generation_prompt=True)
            ids = encode(self.tokenizer, text)
        else:
            text, ids = source, self.tokenizer.encode(source)
        columns = {k: v for k, v in row.items() if k != "prompt"}
        return Prompt(text, ids, index, columns, meta={"row": row_index}, source=source)

    def num_prompts(self, split: str) -> int:
        return len(self.eval_rows if split == "eval" else self.train_rows)
