"""The verifiers venv (``make verifiers-venv``: verifiers 0.4.0, uv, and the offline index of its harness
script's packages): a test that needs it skips naming what is missing, or fails under
``TRAJKIT_REQUIRE_FIXTURES=1``."""
import pytest

from tests.conftest import skip_or_fail


@pytest.fixture
def needs_verifiers(request, verifiers_venv):
    from trajkit.envs.verifiers.process import offline_env, verifiers_python
    from trajkit.errors import ConfigError

    try:
        offline_env()
    except ConfigError as exc:
        skip_or_fail(request, str(exc))
    return str(verifiers_python())


@pytest.fixture(scope="module")
def vf_driver(verifiers_venv):
    """One verifiers driver for a module's tests (importing verifiers takes ~10 s of CPU), with the test
    tasksets on its import path; None when the venv is missing (the tests' ``needs_verifiers`` then skips)."""
    from pathlib import Path

    from trajkit.envs.verifiers.process import Driver, offline_env
    from trajkit.errors import ConfigError

    try:
        offline_env()
    except ConfigError:
        yield None
        return
    with Driver(str(Path(__file__).with_name("tasksets"))) as driver:
        yield driver
