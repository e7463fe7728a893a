"""``cluster.*``: validated on load, shown by ``--print-config``, refused where it cannot work (no Ray needed)."""
import contextlib
import io
import sys

import pytest
import yaml

from tests.rl.conftest import TINY
from trajkit.cli.main import main
from trajkit.cluster.placement import bundles
from trajkit.cluster.split import own_requests, split_rows
from trajkit.engine.params import SamplingParams
from trajkit.engine.rng import mix
from trajkit.errors import ConfigError
from trajkit.rl.config import load_config
from trajkit.rl.trainer import Trainer


def test_the_keys_load_and_print_config_shows_them():
    cfg = load_config("grpo_smollm2", ["cluster.ray=true", "cluster.rollout_workers=2"])
    assert (cfg.cluster.ray, cfg.cluster.rollout_workers) == (True, 2)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["train", "grpo_smollm2", "--print-config", "cluster.ray=true", "cluster.rollout_workers=3"]) == 0
    shown = yaml.safe_load(out.getvalue())["cluster"]
    assert shown["ray"] is True and shown["rollout_workers"] == 3 and shown["weight_transfer"] == "object_store"


@pytest.mark.parametrize("overrides, message", [
    (["cluster.ray=true", "cluster.rollout_workers=0"], "cluster.rollout_workers must be >= 1, got 0"),
    (["cluster.rollout_workers=3"], "cluster.rollout_workers is a setting of a Ray run; set cluster.ray=true"),
    (["cluster.ray=true", "cluster.layout=ring"], "cluster.layout"),
    (["cluster.ray=true", "cluster.worker_cpus=0"], "cluster.worker_cpus must be > 0"),
    (["cluster.ray=true", "cluster.weight_transfer=nccl"], "cluster.worker_gpus > 0"),
    (["cluster.ray=true", "cluster.workers=2"], "did you mean"),
])
def test_bad_settings_are_refused_with_what_to_set(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_config(None, overrides)


def test_cluster_ray_without_ray_installed_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # find_spec("ray") is None, as without the package
    with pytest.raises(ConfigError, match=r"needs Ray, which is not installed: pip install 'trajkit\[ray\]'"):
        load_config(None, ["cluster.ray=true"])


def test_the_in_process_trainer_points_a_ray_config_to_the_cluster_trainer(tmp_path):
    cfg = load_config(None, TINY + ["cluster.ray=true", f"log.out_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="use trajkit.cluster.ClusterTrainer"):
        Trainer(cfg, logger=False)


def test_what_cannot_cross_to_the_actors_is_refused_before_any_starts(tmp_path):
    from trajkit.cluster import ClusterTrainer
    from trajkit.models.spec import TinySpec, build_model
    from trajkit.models.tokenizer import byte_tokenizer

    model = build_model(TinySpec(vocab_size=259, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=2,
                                 intermediate_size=64, max_positions=64), seed=0)
    cfg = load_config(None, TINY + ["cluster.ray=true", f"log.out_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="policy= cannot be given as an object"):
        ClusterTrainer(cfg, model=model, tokenizer=byte_tokenizer(), logger=False)
    # agent and Harbor tasks run on Ray too: their gateway serves the rollout workers (tests/cluster/test_cluster_agent.py)
    assert load_config(None, TINY + ["cluster.ray=true", "task.name=agent", "task.path=x.jsonl", "task.command=x"]).cluster.ray
    with pytest.raises(ConfigError, match="cluster.weight_transfer=nccl is vLLM's transfer: set rollout.backend=vllm"):
        load_config(None, ["cluster.ray=true", "cluster.weight_transfer=nccl", "cluster.worker_gpus=1"])


def test_a_split_batch_draws_each_row_as_the_whole_batch_would():
    """Row i of a request seeded s, sent alone as its own request, gets the stream mix(s, i)."""
    rows = own_requests(SamplingParams(seed=42, max_new_tokens=3), 5)
    assert [mix(p.seed, 0) for p in rows] == [mix(42, i) for i in range(5)]
    assert own_requests(SamplingParams(), 2) == [SamplingParams()] * 2  # unseeded: left as it is
    assert [list(r) for r in split_rows(7, 3)] == [[0, 1, 2], [3, 4], [5, 6]]
    assert bundles(1, 1.0, 0.5) == [{"CPU": 1.0, "GPU": 0.5}, {"CPU": 1.0, "GPU": 0.5}]
