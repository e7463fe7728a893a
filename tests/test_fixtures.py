"""A missing shared real-data fixture skips its test with a reason naming the file, or fails the test when
``TRAJKIT_REQUIRE_FIXTURES=1`` (what CI sets); before, the test errored with a bare FileNotFoundError."""
import os
import subprocess
import sys

from tests import conftest

ROOT = conftest.checkout_root()
TEST = "tests/traces/test_parse.py::test_real_row_structure"  # uses the real_row fixture
WHERE = "the project's shared real-data fixtures, present beside the checkout in CI"


def _pytest(tmp_path, **env):
    environ = {k: v for k, v in os.environ.items() if k not in (conftest.REQUIRE_ENV, conftest.SHARED_DIR_ENV)}
    environ.update(env, TRAJKIT_SHARED_DIR=str(tmp_path / "no-shared"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", TEST], cwd=ROOT,
                          env=environ, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout + done.stderr


def test_missing_fixture_skips_with_reason(tmp_path):
    rc, out = _pytest(tmp_path)
    assert rc == 0, out
    assert "1 skipped" in out and "error" not in out.lower()
    missing = tmp_path / "no-shared" / "fixtures" / "real" / "kimi-row-0c699abf.json"
    assert f"SKIPPED [1] {TEST.split('::')[0]}" in out
    assert f"$TRAJKIT_SHARED_DIR/fixtures/real/kimi-row-0c699abf.json: {WHERE}; not found at {missing}" in out


def test_missing_fixture_fails_when_required(tmp_path):
    rc, out = _pytest(tmp_path, TRAJKIT_REQUIRE_FIXTURES="1")
    assert rc == 1, out
    assert "1 failed" in out and "skipped" not in out and "error" not in out.split("FAILURES")[0].lower()
    assert f"kimi-row-0c699abf.json: {WHERE}" in out
    assert "TRAJKIT_REQUIRE_FIXTURES=1 makes a missing fixture or prerequisite a failure" in out


def test_default_location_is_beside_the_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv(conftest.SHARED_DIR_ENV, raising=False)
    assert conftest.real_fixture("x.json")[0] == ROOT.parent / "shared" / "fixtures" / "real" / "x.json"
    monkeypatch.setattr(conftest, "checkout_root", lambda: tmp_path / "repo")
    path, reason = conftest.real_fixture("kimi-row-0c699abf.json")
    assert path == tmp_path / "shared" / "fixtures" / "real" / "kimi-row-0c699abf.json"
    assert reason.startswith(f"../shared/fixtures/real/kimi-row-0c699abf.json: {WHERE}; not found at {path}")
