"""``trajkit envs compile`` with a scripted model behind the gateway: it plans two tasks from the skill, writes
them, and keeps only the one whose Oracle scores 1 and NOP 0 (the vacuous one is rejected, by reason)."""
import json

import pytest

from tests.envs.harbor.conftest import PLAN, SKILL
from trajkit.cli.main import main
from trajkit.engine import Engine
from trajkit.envs.harbor.check import check_task
from trajkit.envs.harbor.compile import parse_files
from trajkit.envs.harbor.task import load_task
from trajkit.errors import InputError
from trajkit.gateway import Gateway, GatewayConfig, running


def test_compile_keeps_only_the_sound_task(needs_sandbox, scripted_policy, tmp_path, capsys):
    model, tokenizer = scripted_policy
    gateway = Gateway(Engine(model), tokenizer, GatewayConfig(model_name="writer", default_max_tokens=256))
    out = tmp_path / "tasks"
    with running(gateway) as url:
        code = main(["envs", "compile", str(SKILL), "--model", url, "--model-name", "writer", "--out", str(out),
                     "--tasks", "2"])
    gateway.close()
    assert code == 0, capsys.readouterr().out
    rows = json.loads((out / "compile.json").read_text())
    assert [(r["title"], r["verdict"]) for r in rows] == [(PLAN[0], "ok"), (PLAN[1], "vacuous test")]
    assert sorted(p.name for p in out.iterdir()) == ["compile.json", "greet-ada", "rejected"]
    kept = load_task(out / "greet-ada")
    assert kept.environment.network is False and kept.metadata["skill"] == "greeting"
    assert check_task(kept).verdict == "ok"  # an independent re-check of the kept folder
    assert (out / "rejected" / "greet-nobody" / "tests" / "test.sh").is_file()


def test_the_models_files_must_be_exactly_the_three_sections():
    with pytest.raises(InputError, match=r"missing \['solution/solve.sh'\], not allowed \['../evil'\]"):
        parse_files("=== instruction.md\nx\n=== tests/test.sh\ny\n=== ../evil\nz\n")
