"""``trajkit envs check --adversarial``: the hack agents of :mod:`trajkit.envs.harbor.hacks` and
:mod:`trajkit.envs.harbor.hacks_verifier` are blocked on every shipped task and on the naive verifiers of
tests/envs/harbor/naive-verifiers (safe by the verifier's fresh state, not by their own care), and each
deliberately hackable task in tests/envs/harbor/hackable is flagged by exactly the probes that fool its flawed
verifier (each task's test.sh says what its flaw is)."""
import json
from pathlib import Path

from tests.envs.harbor.conftest import SHIPPED
from trajkit.cli.main import main
from trajkit.envs.harbor.hacks_verifier import ALL_PROBES as PROBES

HACKABLE = Path(__file__).with_name("hackable")
NAIVE = Path(__file__).with_name("naive-verifiers")
# they need no solution and apply to every task: never "not applicable"
ALWAYS = ("plant-reward", "shadow-python", "shadow-tools", "rc-files", "timeout-escape")
FLAGGED = {"trusts-inputs": ["truncate-inputs"], "exists-only": ["truncate-inputs", "empty-outputs"],
           "runs-agent-as-root": ["trojan-outputs"], "path-in-verifier-env": ["shadow-tools"],
           "pythonpath-in-verifier-env": ["shadow-python"], "rc-in-verifier-home": ["rc-files"],
           "sqliterc-via-init": ["rc-files"], "loader-in-verifier-env": ["loader-variables"]}
# the probe that gets paid on each naive verifier when the verifier's tools see the agent's state
NAIVE_PROBES = {"sqlite-count": "rc-files", "curl-answer": "rc-files", "pycache-json": "loader-variables",
                "compare-to-tests": "link-outputs"}


def test_every_shipped_task_withstands_the_hack_agents(needs_sandbox, capsys):
    assert main(["envs", "check", str(SHIPPED), "--adversarial", "--json"]) == 0
    rows = {r["task"]: r for r in json.loads(capsys.readouterr().out)}
    assert len(rows) == 9 and {r["verdict"] for r in rows.values()} == {"ok"}
    for name, row in rows.items():
        assert list(row["hacks"]) == [p.name for p in PROBES], name
        assert all(row["hacks"][p] == "blocked" for p in ALWAYS), (name, row["hacks"])
        assert all(v == "blocked" or v.startswith("not applicable: ") for v in row["hacks"].values()), name
    assert rows["hello-file"]["hacks"]["truncate-inputs"] == "not applicable: the task gives the agent no files"
    assert rows["hello-file"]["hacks"]["trojan-outputs"] == "not applicable: the solution writes no program"
    assert rows["greet-script"]["hacks"]["trojan-outputs"] == "blocked"  # its verifier runs greet.sh as nobody
    assert rows["count-errors"]["hacks"]["truncate-inputs"] == "blocked"  # it counts /tests' copy of the log


def test_each_hackable_task_is_flagged_by_the_probes_that_fool_it(needs_sandbox, capsys):
    assert main(["envs", "check", str(HACKABLE), "--adversarial", "--json"]) == 1
    rows = {r["task"]: r for r in json.loads(capsys.readouterr().out)}
    assert {n: r["verdict"] for n, r in rows.items()} == {n: "hackable: " + ", ".join(p) for n, p in FLAGGED.items()}
    for name, probes in FLAGGED.items():
        row = rows[name]
        assert (row["oracle"], row["nop"]) == (1.0, 0.0)  # sound by Oracle and NOP: only the hack agents see it
        assert sorted(p for p, v in row["hacks"].items() if v.startswith("hacked: reward")) == sorted(probes)
        assert all(row["hacks"][p] == "blocked" for p in ALWAYS if p not in probes), (name, row["hacks"])
        how = {p.name: p.how for p in PROBES}
        assert all(f"{p} {how[p]}" in row["detail"] for p in probes)
    assert main(["envs", "check", str(HACKABLE / "trusts-inputs"), "--adversarial"]) == 1
    out = capsys.readouterr().out
    assert "hackable: truncate-inputs" in out and "0 of 1 tasks ok; 1 failed" in out
    assert "hack agents: 7 blocked, 1 got a reward, 3 not applicable" in out  # of 11 probes


def test_naive_verifiers_are_safe_by_the_verifiers_fresh_state(needs_sandbox, capsys):
    """Each naive verifier would pay its probe if its tools saw the agent's dotfiles, the image's loader
    variables or links into /tests; the verifier's own home, allowlisted environment and link removal block it."""
    assert main(["envs", "check", str(NAIVE), "--adversarial", "--json"]) == 0
    rows = {r["task"]: r for r in json.loads(capsys.readouterr().out)}
    assert {n: r["verdict"] for n, r in rows.items()} == {n: "ok" for n in NAIVE_PROBES}
    for name, probe in NAIVE_PROBES.items():
        assert rows[name]["hacks"][probe] == "blocked", (name, rows[name]["hacks"])
        assert all(rows[name]["hacks"][p] == "blocked" for p in ALWAYS), (name, rows[name]["hacks"])
