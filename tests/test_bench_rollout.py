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
