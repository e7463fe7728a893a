"""``trajkit bench rollout``'s arm behind 2 Ray rollout workers runs on the session's Ray and generates exactly
batch x tokens tokens, its table and JSON side by side with the in-process arm's (no timings asserted)."""
import json

from trajkit.cli.main import main


def test_the_two_ray_worker_arm_beside_the_in_process_engine(ray_cluster, smollm2_folder, tmp_path, capsys):
    out = tmp_path / "rollout.json"
    assert main(["bench", "rollout", "--arms", "trajkit,trajkit-ray2", "--batch", "3", "--tokens", "4",
                 "--repeats", "1", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "trajkit-ray2" in table and "load average" in table
    results = json.loads(out.read_text())
    assert [a["arm"] for a in results["arms"]] == ["trajkit", "trajkit-ray2"]
    assert [a["tokens"] for a in results["arms"]] == [12, 12]  # 3 rows x 4 tokens, no stop ids
    assert ray_cluster.is_initialized()  # the arm joined the session's Ray and left it running


def test_harbor_episodes_per_arm_run_the_same_trials(ray_cluster, smollm2_folder, tmp_path, capsys, request):
    """``--task harbor``: each arm runs the same Harbor episodes through a gateway over its backend; the
    in-process engine and 2 Ray workers (each running its trial with a gateway over its own engine, continuous
    batching on both) sample the same tokens."""
    from tests.conftest import skip_or_fail
    from trajkit.envs.sandbox import namespace as nsbox

    why = nsbox.available()
    if why:
        skip_or_fail(request, f"the namespace sandbox cannot run here: {why}")
    out = tmp_path / "harbor.json"
    assert main(["bench", "rollout", "--task", "harbor", "--arms", "trajkit,trajkit-ray2", "--episodes", "2",
                 "--max-turns", "1", "--tokens", "8", "--out", str(out)]) == 0
    assert "eps/s" in capsys.readouterr().out
    arms = json.loads(out.read_text())["arms"]
    assert [a["arm"] for a in arms] == ["trajkit", "trajkit-ray2"] and [a["episodes"] for a in arms] == [2, 2]
    assert arms[0]["tokens"] == arms[1]["tokens"] > 0  # the same seeded rows, whichever backend served them
    assert arms[0]["degraded"] == arms[1]["degraded"] == []
