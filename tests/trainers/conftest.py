"""The trainers' tests reuse the Harbor tests' scripted policy and sandbox check (tests/envs/harbor/conftest.py,
tests/envs/conftest.py): the SFT trainer runs real trials of the task families."""
from tests.envs.conftest import needs_sandbox, one_thread, tiny  # noqa: F401 (fixtures, one of them autouse)
from tests.envs.harbor.conftest import policy_folder, scripted_folder  # noqa: F401 (fixtures)
