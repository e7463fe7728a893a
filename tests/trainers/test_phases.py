"""A pipeline's resumable phases: a finished phase is taken from its record under the same config only."""
import json

from trajkit.trainers.phases import Phases


def test_a_finished_phase_is_taken_from_the_record_and_another_config_runs_it_again(tmp_path):
    path, calls, lines, told = tmp_path / "phases.json", [], [], []

    def work(x):
        calls.append(x)
        return {"x": x}

    first = Phases(path, {"lr": 1}, lines.append, "sft", lambda n, s, skipped: told.append((n, skipped)))
    assert first.run("tasks", work, 3) == {"x": 3} and calls == [3]
    record = json.loads(path.read_text())
    assert list(record) == ["tasks"] and record["tasks"]["config"] == {"lr": 1}
    assert record["tasks"]["result"] == {"x": 3} and record["tasks"]["seconds"] >= 0

    again = Phases(path, {"lr": 1}, lines.append, "sft", lambda n, s, skipped: told.append((n, skipped)))
    assert again.run("tasks", work, 4) == {"x": 3} and calls == [3]  # not run again: the recorded result
    assert lines[-1] == f"sft: tasks already done ({path})" and told == [("tasks", False), ("tasks", True)]

    other = Phases(path, {"lr": 2}, lines.append, "sft")
    assert not other.done("tasks") and other.run("tasks", work, 5) == {"x": 5} and calls == [3, 5]
    assert json.loads(path.read_text())["tasks"]["config"] == {"lr": 2}


def test_a_folder_recorded_before_the_rename_resumes_from_its_stages_json(tmp_path):
    """Records an earlier release wrote as ``stages.json`` (same layout) are read when ``phases.json`` is absent;
    the next record is written as ``phases.json``."""
    old = {"tasks": {"config": {"lr": 1}, "result": {"x": 3}, "seconds": 1.5}}
    (tmp_path / "stages.json").write_text(json.dumps(old))
    calls = []
    phases = Phases(tmp_path / "phases.json", {"lr": 1}, lambda line: None, "sft")
    assert phases.run("tasks", calls.append, 9) == {"x": 3} and calls == [] and phases.seconds == {"tasks": 1.5}
    phases.run("export", lambda: "done")
    record = json.loads((tmp_path / "phases.json").read_text())
    assert list(record) == ["tasks", "export"] and record["tasks"] == old["tasks"]
    assert record["export"]["result"] == "done"
