"""``trajkit envs check --adversarial``: the hack agents of :mod:`trajkit.envs.harbor.hacks` are blocked on every shipped
task, and each deliberately hackable task in tests/envs/harbor/hackable is flagged by exactly the probes that fool its
flawed verifier (each task's test.sh says what its flaw is)."""
import json
from pathlib import Path

from tests.envs.harbor.conftest import SHIPPED
from trajkit.cli.main import main
from trajkit.envs.harbor.hacks import PROBES

HACKABLE = Path(__file__).with_name("hackable")
ALWAYS = ("plant-reward", "shadow-python", "shadow-tools")  # they need no solution: never "not applicable"
FLAGGED = {"trusts-inputs": ["truncate-inputs"], "exists-only": ["truncate-inputs", "empty-outputs"],
           "runs-agent-as-root": ["trojan-outputs"], "path-in-verifier-env": ["shadow-tools"],
           "pythonpath-in-verifier-env": ["shadow-python"]}


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
    assert f"hack agents: {len(PROBES) - 2} blocked, 1 got a reward, 1 not applicable" in out
