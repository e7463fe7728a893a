"""``trajkit envs generate``: instances of the task families as Harbor task folders, in a train or held-out split.

A held-out instance is a new problem, not a new seed of the same text. Three things separate the splits:

- **the solution**: an instance belongs to the held-out split when ``sha1(family + solution) mod 4 == 0``, its
  ``solution`` being the Oracle's command (a quarter of the solution space), else to train; an instance is
  drawn again until it falls in the asked split, so no held-out instance's solution is a train instance's.
  The split is on the solution and not on all the parameters: two instances that differ only in their data
  (the numbers inside a JSON file, the rows of a CSV) have the same command, and such a pair across the
  splits is one problem seen twice, which ``trajkit audit data``'s ``leak.ngram`` reports (the held-out answer
  covered by train text). Instances within a split are distinct by all their parameters (:attr:`TaskSpec.key`);
- **wording**: each family's last instruction template is held-out only; train instances use the others;
- **families**: :data:`HELDOUT_FAMILIES` are never generated for train; ``--split heldout`` includes them, so
  an evaluation can report the pass rate on families never trained on.

**Composed kinds** (:mod:`.compose`, ``--families compose``): each pipeline of primitives is a family; a
train split holds :data:`~.compose.TRAIN_KINDS`, a held-out split every kind, its rows naming the held-out class
(``heldout_kind``: ``composition`` — a new pipeline of trained primitives; ``primitive`` — a kind using a
primitive never trained; ``instance`` — a trained kind, new parameters and wording; null in train). Their
split is stronger than the hash: a held-out instance draws its file names, keys and words from held-out pools.

Instance ``i`` of a family draws from ``random.Random(f"{seed}:{split}:{family}:{i}")``, so a folder is a pure
function of (families, split, n, seed). Each instance is written as ``OUT/FAMILY-HASH`` (``HASH``: the first 8
hex digits of its parameters' digest) and listed in ``OUT/tasks.jsonl`` (``id``, ``family``, ``split``,
``prompt``: the instruction, ``answer``: the Oracle's command; a composed kind's rows also ``heldout_kind``) — the
rows ``trajkit audit data`` reads.
"""
from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from trajkit.envs.harbor.families import compose, kinds
from trajkit.envs.harbor.families.spec import TaskSpec, write_task
from trajkit.errors import ConfigError, InputError

Split = Literal["train", "heldout"]
Generator = Callable[[random.Random, int], TaskSpec]

FAMILIES: dict[str, Generator] = {
    "write-file": kinds.write_file, "count-matches": kinds.count_matches, "rename-ext": kinds.rename_ext,
    "sort-lines": kinds.sort_lines, "json-sum": kinds.json_sum, "csv-to-json": kinds.csv_to_json,
    "greet-script": kinds.greet_script, "env-value": kinds.env_value, "count-lines": kinds.count_lines,
    "upper-case": kinds.upper_case,
}
HELDOUT_FAMILIES = ("count-lines", "upper-case")  # never in a train split
MAX_DRAWS = 200  # draws per instance before a family's parameter space is called exhausted


def split_of(family: str, solution: str) -> Split:
    """The split an instance with this Oracle command belongs to (module docstring).

    >>> split_of("write-file", "printf '%s\\n' 'Hi, Ada!' > /app/memo.txt") in ("train", "heldout")
    True
    """
    digest = hashlib.sha1(f"{family}\0{solution}".encode()).digest()
    return "heldout" if digest[0] % 4 == 0 else "train"


def wordings_for(family: str, split: Split, probe: int | None = None) -> list[int]:
    """The wordings an instance of ``family`` in ``split`` draws from: the last for held-out, the others for
    train; ``probe`` (held-out only) puts a held-out instance in train wording ``probe`` instead."""
    n = compose.words.WORDING_COUNT if family in compose.COMPOSE else len(kinds.WORDINGS[family])
    if probe is not None:
        return [probe]
    return [n - 1] if split == "heldout" else list(range(n - 1))


def check_probe(probe: int | None, split: Split) -> None:
    """``probe`` must be a train wording (0-2) of a held-out split, or None."""
    if probe is None:
        return
    if split != "heldout":
        raise ConfigError("--probe-wording rewords held-out instances; use it with --split heldout")
    if isinstance(probe, bool) or not isinstance(probe, int) or not 0 <= probe < compose.words.WORDING_COUNT - 1:
        raise ConfigError(f"--probe-wording must be a train wording, 0 to {compose.words.WORDING_COUNT - 2}, "
                          f"got {probe!r}")


def heldout_only(family: str) -> bool:
    """Whether ``family`` is never generated for train (a held-out family or held-out composed kind)."""
    return family in HELDOUT_FAMILIES or compose.heldout_kind(family) is not None


def resolve_families(names: str, split: Split) -> list[str]:
    """``all`` or a comma-separated list -> family names; ``compose`` stands for the composed kinds of the split
    (:mod:`.compose`); a held-out family or kind in a train split is an error."""
    if names == "all":
        return [f for f in FAMILIES if split == "heldout" or f not in HELDOUT_FAMILIES]
    chosen = []
    for name in (n.strip() for n in names.split(",")):
        if name == "compose":
            chosen += [k for k in compose.KINDS if split == "heldout" or not heldout_only(k)]
        elif name:
            chosen.append(name)
    unknown = [n for n in chosen if n not in FAMILIES and n not in compose.COMPOSE]
    if unknown or not chosen:
        raise ConfigError(f"--families: unknown {unknown or names!r}; choose 'all', 'compose' or some of "
                          f"{', '.join(FAMILIES)} or of the composed kinds ({', '.join(compose.KINDS)})")
    if split == "train" and (bad := [n for n in chosen if heldout_only(n)]):
        raise ConfigError(f"--families: {', '.join(bad)} are held-out families (never trained on); "
                          "generate them with --split heldout")
    return list(dict.fromkeys(chosen))


def instance(family: str, split: Split, seed: int, index: int,
             phrasings: int = compose.words.DEFAULT_PHRASINGS, probe: int | None = None) -> TaskSpec:
    """Instance ``index`` of ``family`` in ``split``: parameters drawn until its solution falls in the split (a
    composed kind's: drawn from the split's name pools; its train instruction's clauses from ``phrasings``
    phrasings each, which changes no data). ``probe``: the held-out instance itself, worded in train wording
    ``probe`` (one draw of one wording either way, so the data are the same)."""
    rng = random.Random(f"{seed}:{split}:{family}:{index}")
    wordings = wordings_for(family, split, probe)
    if family in compose.COMPOSE:  # split by name pools, not by hash (compose_data.NAMES)
        return compose.COMPOSE[family](rng, rng.choice(wordings), split, phrasings)
    for _ in range(MAX_DRAWS):
        spec = FAMILIES[family](rng, rng.choice(wordings))
        if split_of(family, spec.solution) == split:
            return spec
    raise ConfigError(f"family {family}: no {split} parameters in {MAX_DRAWS} draws")


def task_name(spec: TaskSpec) -> str:
    return f"{spec.family}-{hashlib.sha1(spec.key.encode()).hexdigest()[:8]}"


def generate(families: str, split: Split, n: int, seed: int, out: str | Path,
             phrasings: int = compose.words.DEFAULT_PHRASINGS, probe: int | None = None) -> list[dict]:
    """``n`` distinct instances of each family in ``split`` as task folders under ``out`` (which must not hold
    tasks already); returns the manifest rows, also written to ``out/tasks.jsonl``. ``phrasings``: how many
    train phrasings a composed kind's train clause draws from (:func:`.compose_words.instruction`; the same
    seed gives the same instances and data whatever it is, and held-out instructions never change).
    ``probe``: write the held-out instances in train wording ``probe`` (0-2) instead of the held-out one, to
    tell a gap in reading the held-out wording from a gap in skill; never train on such a folder."""
    if n < 1:
        raise ConfigError(f"--n must be at least 1, got {n}")
    compose.words.check_phrasings(phrasings)
    check_probe(probe, split)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out}: not empty; generate into a new folder (tasks of two runs would mix)")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for family in resolve_families(families, split):
        seen: set[str] = set()
        index = 0
        while len(seen) < n:
            if index >= n * 20:
                raise ConfigError(f"family {family}: only {len(seen)} distinct {split} instances; ask for fewer")
            spec = instance(family, split, seed, index, phrasings, probe)
            index += 1
            if spec.key in seen:
                continue
            seen.add(spec.key)
            name = task_name(spec)
            row = {"id": name, "family": family, "split": split, "wording": spec.wording,
                   "prompt": spec.instruction, "answer": spec.solution}
            if probe is not None:
                row["probe_wording"] = probe  # a held-out instance in a train wording: an eval probe only
            if family in compose.COMPOSE:
                spec.heldout_kind = row["heldout_kind"] = (compose.heldout_kind(family) or "instance"
                                                           if split == "heldout" else None)
            write_task(spec, name, split, out)
            rows.append(row)
    (out / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows
