"""Choosing and configuring a backend: names, draft kinds mapped to vLLM's speculative_config, and the errors
that say what to set (no vLLM or Ray started here)."""
import re
from pathlib import Path

import pytest

from trajkit.backends.actors import start_actor
from trajkit.backends.registry import check_backend
from trajkit.backends.vllm import VllmBackend, speculative_config
from trajkit.errors import ConfigError
from trajkit.recipes.cache import VLLM_VENV
from trajkit.rl.backend import vllm_speculative_config
from trajkit.rl.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def test_rollout_backend_is_validated_and_defaults_to_trajkit():
    assert load_config("grpo_smollm2").rollout.backend == "trajkit"
    assert load_config("grpo_smollm2", ["rollout.backend=vllm"]).rollout.backend == "vllm"
    with pytest.raises(ConfigError, match=r"rollout.backend must be one of \['trajkit', 'vllm'\], got 'vlm'"):
        load_config("grpo_smollm2", ["rollout.backend=vlm"])
    with pytest.raises(ConfigError, match="unknown backend 'sglang'; use one of trajkit, vllm"):
        check_backend("sglang")


def test_draft_kinds_map_to_vllm_speculative_config():
    assert speculative_config("none", 3) is None
    assert speculative_config("ngram", 3) == {"method": "ngram", "num_speculative_tokens": 3,
                                              "prompt_lookup_max": 4, "prompt_lookup_min": 1}
    assert speculative_config("model", 2, "/d") == {"method": "draft_model", "model": "/d",
                                                    "num_speculative_tokens": 2}
    with pytest.raises(ConfigError, match="'window' has no vLLM equivalent"):
        speculative_config("window", 3)
    with pytest.raises(ConfigError, match="fixed k"):
        speculative_config("ngram", "auto")


def test_a_training_run_does_not_speculate_on_vllm_whose_speculated_log_probs_are_wrong():
    assert vllm_speculative_config(load_config(None, ["rollout.backend=vllm"]), None) is None
    for kind in ("ngram", "model"):
        cfg = load_config(None, ["rollout.backend=vllm", f"draft.kind={kind}"])
        with pytest.raises(ConfigError, match=f"draft.kind={kind} with rollout.backend=vllm: vLLM 0.32 returns "
                                              "wrong log-probs.*rollout.backend=trajkit"):
            vllm_speculative_config(cfg, "/d")
    # the agent task's gateway serves any backend (vLLM: whole generate calls, its own prefix cache)
    cfg = load_config(None, ["rollout.backend=vllm", "task.name=agent", "task.path=tasks.jsonl", "task.command=run-agent"])
    assert (cfg.task.name, cfg.rollout.backend) == ("agent", "vllm")


def test_missing_model_folder_and_missing_venv_say_what_to_do(tmp_path):
    with pytest.raises(ConfigError, match="not a Hugging Face model folder"):
        VllmBackend(str(tmp_path), python="/nowhere/python")
    with pytest.raises(ConfigError, match=r"no python at /nowhere/python: build the venv first \(make vllm-venv\)"):
        start_actor(object, python="/nowhere/python")


def test_the_cached_venv_name_is_the_makefiles_pinned_version():
    makefile = (ROOT / "Makefile").read_text()
    version = re.search(r"^VLLM_VERSION\s*:=\s*(\S+)", makefile, re.M).group(1)
    assert VLLM_VENV == f"vllm-cpu-{version}"
    assert re.search(r"^RAY_VERSION\s*:=\s*2\.60\.0$", makefile, re.M)
    assert '"ray==2.60.0"' in (ROOT / "pyproject.toml").read_text()


def test_a_given_backend_must_be_the_configured_kind():
    from types import SimpleNamespace

    from trajkit.rl.rollout import Rollout

    with pytest.raises(ConfigError, match="rollout.backend=trajkit but the given backend is 'vllm'"):
        Rollout(load_config(None), policy=None, backend=SimpleNamespace(name="vllm"))
