"""The namespace sandbox needs root and util-linux (CI runs as root): without them its tests are skipped with
the reason, or fail under ``TRAJKIT_REQUIRE_FIXTURES=1`` (tests/conftest.py :func:`skip_or_fail`)."""
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail
from trajkit.envs import nsbox

SHIPPED = Path(nsbox.__file__).with_name("tasks")
BROKEN = Path(__file__).with_name("broken")


@pytest.fixture
def needs_sandbox(request):
    why = nsbox.available()
    if why:
        skip_or_fail(request, f"the namespace sandbox cannot run here: {why}")
