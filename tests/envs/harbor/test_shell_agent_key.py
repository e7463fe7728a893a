"""The shell agent is handed its run's key on its command line in the sandbox: a key of any shape reaches it
as given, one that starts with ``-`` (``secrets.token_urlsafe`` can mint one) included. No sandbox needed: a
stand-in box records the command, and the agent's own argument parser reads it back."""
import shlex

from trajkit.envs.harbor import agents, shell_agent
from trajkit.envs.harbor.task import load_task
from trajkit.envs.sandbox.base import ExecResult
from tests.envs.harbor.conftest import SHIPPED


class Box:
    def __init__(self):
        self.commands = []

    def expose(self, port):
        return f"127.0.0.1:{port}"

    def upload(self, src, dst):
        pass

    def exec(self, command, timeout_s=None, **kw):
        self.commands.append(command)
        return ExecResult(1, "", "", 0.0)


def _parsed_key(key: str, monkeypatch) -> str:
    box = Box()
    agents.shell_agent("http://127.0.0.1:8000/v1", key, "policy")(load_task(SHIPPED / "hello-file"), box)
    argv = shlex.split(box.commands[-1])[2:]  # after "python3 .../shell_agent.py"
    seen = {}
    monkeypatch.setattr(shell_agent, "run", lambda args: seen.setdefault("key", args.api_key) and {})
    shell_agent.main(argv)
    return seen["key"]


def test_a_key_reaches_the_agent_as_given(monkeypatch):
    for key in ("-leading-dash", "tk-abc_DEF-123", "it's $odd"):
        assert _parsed_key(key, monkeypatch) == key


def test_minted_keys_never_start_with_a_dash(monkeypatch):
    from trajkit.gateway import sessions

    monkeypatch.setattr(sessions.secrets, "token_urlsafe", lambda n: "-" + "a" * 31)
    key = sessions.SessionStore().open("run-1-0", "policy").key
    assert not key.startswith("-") and key.endswith("-" + "a" * 31)
