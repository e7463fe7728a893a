"""Task families (``trajkit envs generate``): deterministic folders, disjoint splits, every family sound in the
real sandbox (Oracle 1, NOP 0, no hack agent paid), verifiers that refuse near-miss answers, and held-out
instances that ``trajkit audit data`` passes where a mere reseed of the train split fails."""
import json
import random

import pytest

from trajkit.cli.main import main
from trajkit.envs.harbor.check import check_tasks
from trajkit.envs.harbor.families import FAMILIES, HELDOUT_FAMILIES, generate, split_of
from trajkit.envs.harbor.families.generate import instance, resolve_families
from trajkit.envs.harbor.families.kinds import WORDINGS
from trajkit.envs.harbor.task import load_task
from trajkit.envs.harbor.trial import AgentResult, run_trial
from trajkit.errors import ConfigError, InputError


def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_same_flags_write_the_same_folder(tmp_path):
    generate("all", "train", 2, 7, tmp_path / "a")
    generate("all", "train", 2, 7, tmp_path / "b")
    generate("all", "train", 2, 8, tmp_path / "c")
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert _files(tmp_path / "a") != _files(tmp_path / "c")


def test_splits_share_no_solution_no_wording_and_no_heldout_family(tmp_path):
    train = generate("all", "train", 6, 0, tmp_path / "train")
    held = generate("all", "heldout", 3, 0, tmp_path / "heldout")
    assert {r["family"] for r in train} == set(FAMILIES) - set(HELDOUT_FAMILIES)
    assert {r["family"] for r in held} == set(FAMILIES)
    assert {r["id"] for r in train}.isdisjoint(r["id"] for r in held)
    assert {r["answer"] for r in train}.isdisjoint(r["answer"] for r in held)
    for r in train + held:  # the Oracle's command hashes into the row's split, which the folder's metadata says
        task = load_task(tmp_path / r["split"] / r["id"])
        assert (task.solution_dir / "solve.sh").read_text().rstrip("\n").endswith(r["answer"])
        assert split_of(r["family"], r["answer"]) == r["split"] == task.metadata["split"]
        last = len(WORDINGS[r["family"]]) - 1
        assert (r["wording"] == last) == (r["split"] == "heldout")
    assert len(train) == 8 * 6 and len(held) == 10 * 3


def test_split_of_is_a_quarter_of_the_solution_space():
    rng = random.Random(0)
    keys = [json.dumps({"x": rng.random()}) for _ in range(4000)]
    share = sum(split_of("f", k) == "heldout" for k in keys) / len(keys)
    assert 0.22 < share < 0.28  # sha1's first byte mod 4 == 0: expected 0.25, sd 0.007


def test_bad_family_choices_are_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="count-lines are held-out families"):
        resolve_families("write-file,count-lines", "train")
    with pytest.raises(ConfigError, match="unknown \\['nope'\\]"):
        resolve_families("nope", "heldout")
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "old").write_text("")
    with pytest.raises(InputError, match="not empty"):
        generate("all", "train", 1, 0, tmp_path / "x")
    assert main(["envs", "generate", "--split", "train", "--families", "upper-case", "--out", str(tmp_path / "y")]) == 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_heldout_passes_audit_data_where_a_reseeded_train_split_fails(tmp_path, capsys, seed):
    """At the named families' loop sizes (sft_harbor_smollm2 with families=all: 40 train instances a family, 2
    held-out) and seeds: split by parameters, 3 of seed 0's 20 held-out instances had a train instance with the
    same Oracle command (json-sum, csv-to-json: only the data differed), which leak.ngram failed."""
    generate("all", "train", 40, seed, tmp_path / "train")
    generate("all", "heldout", 2, seed, tmp_path / "heldout")
    generate("all", "train", 3, seed + 1, tmp_path / "reseeded")
    capsys.readouterr()
    manifest = str(tmp_path / "train" / "tasks.jsonl")
    assert main(["audit", "data", "--train", manifest, "--eval", str(tmp_path / "heldout" / "tasks.jsonl"),
                 "--json"]) == 0
    verdicts = {c["id"]: c["verdict"] for c in json.loads(capsys.readouterr().out)["checks"]}
    assert verdicts == {"leak.exact": "PASS", "leak.ngram": "PASS", "leak.near": "PASS"}
    # the same families with another seed are not new problems: the audit catches the shared text
    assert main(["audit", "data", "--train", manifest, "--eval", str(tmp_path / "reseeded" / "tasks.jsonl")]) == 1


def test_every_family_is_sound_and_unhackable_in_the_sandbox(needs_sandbox, tmp_path):
    generate("all", "heldout", 1, 3, tmp_path)
    rows = check_tasks(tmp_path, jobs=2, adversarial=True)
    assert [(r.task.rsplit("-", 1)[0], r.verdict, r.oracle, r.nop) for r in rows] == \
        [(f, "ok", 1.0, 0.0) for f in sorted(FAMILIES)]
    assert all(v == "blocked" or v.startswith("not applicable") for r in rows for v in r.hacks.values())


def _answering(command):
    return lambda task, box: AgentResult([box.exec(command, timeout_s=30)])


@pytest.mark.parametrize("family,make,reward", [
    ("count-matches", lambda s: f"echo {s.checks[0].want} > {s.checks[0].path}", 1.0),
    ("count-matches", lambda s: f"printf '  {s.checks[0].want}' > {s.checks[0].path}", 1.0),
    ("count-matches", lambda s: f"echo {int(s.checks[0].want) + 1} > {s.checks[0].path}", 0.0),
    ("count-matches", lambda s: f"echo '{s.checks[0].want} lines' > {s.checks[0].path}", 0.0),
    ("write-file", lambda s: f"printf '%s' '{s.checks[0].want}' > {s.checks[0].path}", 1.0),
    ("write-file", lambda s: f"printf '%s\\n' '{s.checks[0].want.lower()}' > {s.checks[0].path}", 0.0),
    ("json-sum", lambda s: f"echo '{json.dumps(s.checks[0].want)}' > {s.checks[0].path}", 1.0),
    ("json-sum", lambda s: f"echo '{{\"total\": {s.checks[0].want['total']}, \"x\": 1}}' > {s.checks[0].path}", 0.0),
    # a script that prints the right greeting but is not executable; one that writes the reward as root would
    ("greet-script", lambda s: f"printf '#!/bin/sh\\necho \"{s.params['greeting']}, $1{s.params['end']}\"\\n' > {s.checks[0].path}",
     0.0),
    ("greet-script", lambda s: f"printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > {s.checks[0].path}"
                               f" && chmod +x {s.checks[0].path}", 0.0),
    # renamed, but the old names left behind
    ("rename-ext", lambda s: f"cd /app/{s.params['dir']} && for f in *.{s.params['old']}; do "
                             f"cp \"$f\" \"${{f%.{s.params['old']}}}.{s.params['new']}\"; done", 0.0),
])
def test_verifiers_accept_equivalent_answers_and_refuse_near_misses(needs_sandbox, tmp_path, family, make, reward):
    from trajkit.envs.harbor.families.generate import task_name
    from trajkit.envs.harbor.families.spec import write_task

    spec = instance(family, "train", 0, 0)
    task = load_task(write_task(spec, task_name(spec), "train", tmp_path))
    result = run_trial(task, _answering(make(spec)), "scripted")
    assert result.error is None and result.reward == reward, result.logs
