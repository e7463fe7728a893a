"""Building a run: the default task exists, task names are checked against the registry, and a warm
start trains a draft only for draft kinds that have weights."""
import pytest

from trajkit.errors import ConfigError
from trajkit.rl.config import TrainConfig, load_config
from trajkit.envs.registry import TASKS

WARM = ["policy.source=task_warmstart", "policy.warmstart_steps=2", "draft.model.warmstart_steps=2"]


def test_default_config_names_a_registered_task():
    assert TrainConfig().task.name in TASKS
    with pytest.raises(ConfigError, match=r"task.name must be one of \[.*'rep'.*\] or an import path .*, got 'echo'"):
        load_config(None, ["task.name=echo"])


def test_a_registered_task_is_accepted_without_other_changes(monkeypatch):
    monkeypatch.setitem(TASKS, "mine", TASKS["copy"])
    assert load_config(None, ["task.name=mine"]).task.name == "mine"


@pytest.mark.parametrize("kind, trained", [("none", ["warmstart"]), ("ngram", ["warmstart"]),
                                           ("model", ["warmstart", "warmdraft"]),
                                           ("window", ["warmstart", "warmdraft"])])
def test_warm_start_distils_a_draft_only_when_it_has_weights(kind, trained, tiny, tmp_path, monkeypatch):
    import trajkit.recipes.warmstart as ws
    from trajkit.rl.build import build_models, build_tokenizer

    monkeypatch.setenv("TRAJKIT_CACHE", str(tmp_path / "cache"))
    names = []
    real_fit = ws.fit
    monkeypatch.setattr(ws, "fit", lambda model, batches, loss, sched, name: names.append(name) or
                        real_fit(model, batches, loss, sched, name=name))
    cfg = tiny(*WARM, f"draft.kind={kind}")
    policy, draft = build_models(cfg, build_tokenizer(cfg))
    assert names == trained
    assert (draft is not None) == (kind in ("model", "window"))
    built = list((tmp_path / "cache" / "rl-warmstart").iterdir())
    assert len(built) == 1 and (built[0] / "draft").exists() == (kind in ("model", "window"))
    names.clear()
    build_models(cfg, build_tokenizer(cfg))  # the second time it comes from the cache
    assert names == []
