"""The environment tests that train a step share the RL tests' tiny models (``tiny`` fixture, one thread).

The namespace sandbox needs root and util-linux (CI runs as root): without them its tests are skipped with the
reason, or fail under ``TRAJKIT_REQUIRE_FIXTURES=1`` (tests/conftest.py :func:`skip_or_fail`). A test that made
sandboxes checks that none left a mount on the host with :func:`mounts_at_or_under`."""
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail
from tests.rl.conftest import TINY, one_thread, tiny  # noqa: F401 (fixtures, one of them autouse)
from trajkit.envs.sandbox import namespace as nsbox


@pytest.fixture
def needs_sandbox(request):
    why = nsbox.available()
    if why:
        skip_or_fail(request, f"the namespace sandbox cannot run here: {why}")


def mounts_at_or_under(root: Path) -> list[str]:
    """The host's mount points that are ``root`` or inside it (mountinfo's fifth field; a plain substring test
    took ``/tmp/trajkit-sbx-3700/disk``, another sandbox's, for one under ``/tmp/trajkit-sbx-370``)."""
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p == str(root) or p.startswith(f"{root}/")]
