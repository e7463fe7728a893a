"""The environment tests that train a step share the RL tests' tiny models (``tiny`` fixture, one thread).

The namespace sandbox needs root and util-linux (CI runs as root): without them its tests are skipped with the
reason, or fail under ``TRAJKIT_REQUIRE_FIXTURES=1`` (tests/conftest.py :func:`skip_or_fail`)."""
import pytest

from tests.conftest import skip_or_fail
from tests.rl.conftest import TINY, one_thread, tiny  # noqa: F401 (fixtures, one of them autouse)
from trajkit.envs.sandbox import namespace as nsbox


@pytest.fixture
def needs_sandbox(request):
    why = nsbox.available()
    if why:
        skip_or_fail(request, f"the namespace sandbox cannot run here: {why}")
