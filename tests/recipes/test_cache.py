"""One cache resolver; publishing a folder built aside never leaves a temporary folder behind."""
from pathlib import Path

import pytest

from trajkit.models.fit import Schedule
from trajkit.recipes.cache import building, cache_dir
from trajkit.recipes.warmstart import WarmStart


@pytest.mark.parametrize("value", [None, ""])
def test_unset_or_empty_cache_variable_means_the_home_cache(value, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    if value is None:
        monkeypatch.delenv("TRAJKIT_CACHE", raising=False)
    else:
        monkeypatch.setenv("TRAJKIT_CACHE", value)
    assert cache_dir() == tmp_path / ".cache" / "trajkit"
    warm = WarmStart({"a": 1}, policy=None, policy_schedule=Schedule(1, 1e-3))
    assert warm.path().parent == tmp_path / ".cache" / "trajkit" / "rl-warmstart"


def test_published_folder_appears_whole(tmp_path):
    target = tmp_path / "built"
    with building(target) as tmp:
        (tmp / "a.txt").write_text("x")
        assert not target.exists()
    assert (target / "a.txt").read_text() == "x"
    assert [p.name for p in tmp_path.iterdir()] == ["built"]


def test_another_process_publishing_first_wins_and_nothing_is_left(tmp_path):
    target = tmp_path / "built"
    with building(target) as tmp:
        (tmp / "mine.txt").write_text("mine")
        target.mkdir()  # another process published while we were building
        (target / "theirs.txt").write_text("theirs")
    assert sorted(p.name for p in target.iterdir()) == ["theirs.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["built"]


def test_a_failed_build_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with building(tmp_path / "built") as tmp:
            (tmp / "half.txt").write_text("x")
            raise RuntimeError("boom")
    assert list(Path(tmp_path).iterdir()) == []
