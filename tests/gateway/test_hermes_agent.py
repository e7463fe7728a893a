"""The real Hermes Agent (PyPI ``hermes-agent==0.19.0``, in its own virtualenv: ``make hermes-venv``) against
the gateway: its calls land in the session named by its API key, its own saved trajectory agrees with the
gateway's Hermes export turn for turn, and the stitched chain's sampled tokens are the recorded ones.

The model is a random tiny byte model, so the agent gets text replies (no tool call) and, on
``finish_reason: length``, asks it to continue: a multi-call session. Missing: a fine-tuned model that makes
one ``terminal`` call (see docs/gateway.md)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from trajkit.engine import Engine
from trajkit.gateway import Gateway, GatewayConfig, running
from trajkit.gateway.export import session_hermes_rows
from trajkit.gateway.stitch import stitch
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.recipes.cache import cache_dir
from trajkit.traces.tools import tools_from_system_prompt

DRIVER = Path(__file__).with_name("hermes_driver.py")


def _agent_python() -> Path:
    py = cache_dir() / "hermes-agent-0.19.0" / "bin" / "python"
    if not py.exists():
        if os.environ.get("TRAJKIT_REQUIRE_FIXTURES"):
            pytest.fail(f"{py} is missing; run `make hermes-venv`")
        pytest.skip(f"the Hermes Agent virtualenv is missing ({py}); run `make hermes-venv`")
    return py


def test_the_hermes_agent_runs_against_the_gateway_and_its_trajectory_matches_the_export(tmp_path):
    py = _agent_python()
    model = build_model(TinySpec(vocab_size=259, hidden_size=32, max_positions=32768), seed=0, init_scale=5.0)
    gw = Gateway(Engine(model), byte_tokenizer(), GatewayConfig(model_name="tiny", default_max_tokens=12))
    with running(gw) as url:
        proc = subprocess.run([str(py), str(DRIVER), url, "agent-session", "tiny", "Run `echo hi`."], cwd=tmp_path,
                              env={**os.environ, "HERMES_HOME": str(tmp_path)}, capture_output=True, text=True,
                              timeout=300, check=False)
    gw.close()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert gw.sessions.ids() == ["agent-session"]
    session = gw.sessions.find("agent-session")
    assert len(session.records) >= 1 and session.records[0].tools
    saved = [json.loads(line) for line in (tmp_path / "trajectory_samples.jsonl").read_text().splitlines()]
    ours = session_hermes_rows(session)
    theirs, mine = saved[-1]["conversations"], ours[-1]["conversations"]
    assert [t["from"] for t in theirs] == [t["from"] for t in mine]
    assert tools_from_system_prompt(theirs[0]["value"]) == tools_from_system_prompt(mine[0]["value"])
    assert theirs[1:] == mine[1:]
    chains = stitch(session.records)
    sampled = [t for r in session.records for t in r.choices[0].token_ids]
    assert len(chains) == 1  # the agent's history came back as a token prefix of every next prompt
    assert [t for t, m in zip(chains[0].completion_ids, chains[0].loss_mask) if m] == sampled
