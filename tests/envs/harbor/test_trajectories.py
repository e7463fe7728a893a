"""Oracle trajectories: every training task's solution replayed through the shell agent's protocol in a real
trial, kept only when the verifier pays; compared with the sources (the task's instruction, its solve.sh, the
shell agent's own parser and system prompt), read by ``trajkit traces stats``, dropped runs counted by reason."""
import json
import shutil

from tests.envs.harbor.conftest import BROKEN
from trajkit.cli.main import main
from trajkit.envs.harbor.families import generate
from trajkit.envs.harbor.trajectories import CLOSING, oracle_traces
from trajkit.envs.harbor.shell_agent import SYSTEM, command_of
from trajkit.envs.harbor.task import load_task, load_tasks


def test_oracle_runs_become_shell_agent_conversations(needs_sandbox, tmp_path, capsys):
    rows = generate("write-file,count-matches,greet-script", "train", 1, 0, tmp_path / "tasks")
    shutil.copytree(BROKEN / "wrong-solution", tmp_path / "tasks" / "wrong-solution")
    kept, counts = oracle_traces(load_tasks(tmp_path / "tasks").tasks, jobs=2)
    assert dict(counts) == {"kept": 3, "wrong": 1}
    by_id = {r["id"]: r for r in kept}
    assert sorted(by_id) == sorted(r["id"] for r in rows)
    for source in rows:
        task = load_task(tmp_path / "tasks" / source["id"])
        messages = by_id[source["id"]]["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]
        assert messages[0]["content"] == SYSTEM and messages[1]["content"] == task.instruction
        # the shell agent would run exactly the solution's command from this reply
        assert command_of(messages[2]["content"]) == source["answer"] + "\n"
        assert messages[3]["content"].startswith("exit code: 0\n") and messages[4]["content"] == CLOSING
        assert command_of(CLOSING) is None  # the closing reply ends the agent's run
        assert by_id[source["id"]]["category"] == source["family"]
    out = tmp_path / "oracle.jsonl"
    assert main(["envs", "oracle-traces", str(tmp_path / "tasks"), "--out", str(out), "--jobs", "2"]) == 0
    assert "3 trajectories kept" in (printed := capsys.readouterr().out) and "dropped: wrong 1" in printed
    assert main(["traces", "stats", str(out), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["traces"], stats["assistant_turns"]) == (3, 6)
