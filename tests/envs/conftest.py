"""The namespace sandbox needs root and util-linux (CI runs as root): without them its tests are skipped with
the reason, or fail under ``TRAJKIT_REQUIRE_FIXTURES=1`` (tests/conftest.py :func:`skip_or_fail`)."""
import json
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


SOLVE = "```bash\nprintf 'Hello, Harbor!\\n' > /app/hello.txt\n```"
# what the shell agent prints after that reply and "Done.": the agent output a judge reads
SHELL_OUTPUT = json.dumps({"turns": 2, "commands": [{"command": "printf 'Hello, Harbor!\\n' > /app/hello.txt\n",
                                                      "exit_code": 0}], "finish": "no_command"})
JUDGE_REPLY = "One command, the exact greeting.\nSCORE: 4"


@pytest.fixture(scope="session")
def scripted_folder():
    """A tiny model fine-tuned on two scripted conversations (cached; the first build takes about a minute of
    CPU): the shell agent solving hello-file (the right command, then "Done."), and a judge grading that run
    against hello-file's rubric with JUDGE_REPLY."""
    from trajkit.envs.rubric import judge_messages
    from trajkit.envs.shell_agent import SYSTEM
    from trajkit.envs.task import load_task
    from trajkit.recipes.scripted import ScriptedRecipe, scripted_model

    task = load_task(SHIPPED / "hello-file")
    agent = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task.instruction},
             {"role": "assistant", "content": SOLVE}, {"role": "user", "content": "exit code: 0\n"},
             {"role": "assistant", "content": "Done."}]
    rubric = (task.tests_dir / "rubric.md").read_text()
    judge = judge_messages(task, rubric, SHELL_OUTPUT) + [{"role": "assistant", "content": JUDGE_REPLY}]
    return scripted_model([(agent, None), (judge, None)], ScriptedRecipe(steps=100, vocab_size=512))


@pytest.fixture
def scripted_policy(scripted_folder):
    """(model, tokenizer) of :func:`scripted_folder`, freshly loaded."""
    from trajkit.models.load import load_model, load_tokenizer

    return load_model(scripted_folder / "model"), load_tokenizer(scripted_folder / "tokenizer")
