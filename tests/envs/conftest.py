"""The environment tests that train a step share the RL tests' tiny models (``tiny`` fixture, one thread)."""
from tests.rl.conftest import TINY, one_thread, tiny  # noqa: F401 (fixtures, one of them autouse)
