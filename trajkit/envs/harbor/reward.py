"""The verifier's reward file -> ``{name: value}``, every value a finite number inside the task's range.

``/logs/verifier/reward.json`` (a non-empty object of numbers) is read first, else ``reward.txt`` (one number).
Whatever a verifier (or an agent that fooled it) can leave there is either a reward or a :class:`RewardError`
naming the task and the file, never another exception: a file that is not a regular file (a FIFO, a folder) is
absent; more than :data:`MAX_REWARD_BYTES` is refused unread; JSON that Python will not parse (an integer of
more than 4,300 digits raises ``ValueError``, deep nesting ``RecursionError``) or a number that is not finite
as a float (``1e400``, a 400-digit integer, ``NaN``) is malformed. Each value must then lie in the task's
``[verifier] reward_range`` (default ``[0, 1]``): ``1e308`` in a ``[0, 1]`` task is the task's error, not a
reward to train on.
"""
from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

from trajkit.envs.harbor.task import HarborTask
from trajkit.envs.sandbox.base import Sandbox
from trajkit.errors import TrajkitError

MAX_REWARD_BYTES = 1 << 16
NAMES = ("reward.json", "reward.txt")


class RewardError(TrajkitError, ValueError):
    """The verifier wrote no usable reward (the message names the task and the file)."""


def read_reward(task: HarborTask, box: Sandbox) -> dict[str, float]:
    """``/logs/verifier/reward.json`` (first) or ``reward.txt`` -> ``{name: value}`` (module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        for name in NAMES:
            local = Path(tmp) / name
            try:
                box.download(f"/logs/verifier/{name}", local, max_bytes=MAX_REWARD_BYTES)
            except FileNotFoundError:
                continue
            except (TrajkitError, OSError) as exc:  # a download the sandbox refuses (too large, not a file)
                raise RewardError(f"task {task.name}: /logs/verifier/{name} could not be read ({exc})") from None
            if not local.is_file():
                continue
            with open(local, "rb") as fh:
                data = fh.read(MAX_REWARD_BYTES + 1)
            if len(data) > MAX_REWARD_BYTES:
                raise RewardError(f"task {task.name}: /logs/verifier/{name} is over {MAX_REWARD_BYTES} bytes")
            values = parse_reward(data.decode("utf-8", errors="replace"), name, task.name)
            return check_range(values, task.verifier.reward_range, name, task.name)
    raise RewardError(f"task {task.name}: tests/test.sh wrote no /logs/verifier/reward.json or reward.txt")


def check_range(values: dict[str, float], bounds: tuple[float, float], name: str, task: str = "?") -> dict[str, float]:
    """``values`` when each lies in ``bounds`` (inclusive), else a :class:`RewardError`.

    >>> check_range({"reward": 1.2}, (0.0, 2.0), "reward.json")
    {'reward': 1.2}
    """
    low, high = bounds
    for key, value in values.items():
        if not low <= value <= high:
            raise RewardError(f"task {task}: /logs/verifier/{name}: key {key!r} = {value!r} is outside "
                              f"[verifier] reward_range = [{low:g}, {high:g}]")
    return values


def parse_reward(text: str, name: str, task: str = "?") -> dict[str, float]:
    """The reward file's text -> ``{name: value}``, every value finite.

    >>> parse_reward('{"reward": 1, "style": 0.5}', "reward.json")
    {'reward': 1.0, 'style': 0.5}
    >>> parse_reward(" 0.25\\n", "reward.txt")
    {'reward': 0.25}
    """
    where = f"task {task}: /logs/verifier/{name}"
    if not text.strip():
        raise RewardError(f"{where} is empty")
    if not name.endswith(".json"):
        try:
            value = float(text.strip())
        except ValueError:
            raise RewardError(f"{where} must hold one number, got {text.strip()[:80]!r}") from None
        return {"reward": _finite(value, where, "must hold a finite number")}
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, an over-long integer, deep nesting
        raise RewardError(f"{where} is not JSON we can read ({str(exc)[:200]})") from None
    if not isinstance(data, dict) or not data:
        raise RewardError(f"{where} must be a non-empty object of numbers, got {text.strip()[:80]!r}")
    values = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RewardError(f"{where}: key {key!r} must be a finite number, got {str(value)[:80]!r}")
        values[str(key)] = _finite(value, where, f"key {key!r} must be a finite number")
    return values


def _finite(value: int | float, where: str, what: str) -> float:
    """``value`` as a float when that is finite (an integer too large for a float is not), else a
    :class:`RewardError` saying ``what``."""
    try:
        number = float(value)
    except OverflowError:
        raise RewardError(f"{where}: {what}, got an integer of {value.bit_length()} bits") from None
    if not math.isfinite(number):
        raise RewardError(f"{where}: {what}, got {value!r}")
    return number
