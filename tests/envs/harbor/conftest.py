"""The Harbor tests' shared tasks and scripted policy (``needs_sandbox`` is in tests/envs/conftest.py)."""
import json
from pathlib import Path

import pytest

from trajkit.envs.sandbox import namespace as nsbox

SHIPPED = Path(nsbox.__file__).parents[1] / "tasks"  # trajkit/envs/tasks: the shipped Harbor task folders
BROKEN = Path(__file__).with_name("broken")


SOLVE = "```bash\nprintf 'Hello, Harbor!\\n' > /app/hello.txt\n```"
# what the shell agent prints after that reply and "Done.": the agent output a judge reads
SHELL_OUTPUT = json.dumps({"turns": 2, "commands": [{"command": "printf 'Hello, Harbor!\\n' > /app/hello.txt\n",
                                                      "exit_code": 0}], "finish": "no_command"})
JUDGE_REPLY = "One command, the exact greeting.\nSCORE: 4"
SKILL = Path(__file__).with_name("skills") / "greeting" / "SKILL.md"
PLAN = ("Greet Ada", "Greet nobody")  # the scripted planner's titles: a sound task and a vacuous one
WRITTEN = {
    "Greet Ada": "=== instruction.md\nWrite /app/greet-Ada.txt holding `Hello, Ada!` and a newline.\n"
                 "=== tests/test.sh\n[ \"$(cat /app/greet-Ada.txt 2>/dev/null)\" = 'Hello, Ada!' ] && "
                 "echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
                 "=== solution/solve.sh\necho 'Hello, Ada!' > /app/greet-Ada.txt\n",
    "Greet nobody": "=== instruction.md\nGreet nobody.\n=== tests/test.sh\necho 1 > /logs/verifier/reward.txt\n"
                    "=== solution/solve.sh\ntrue\n",
}


@pytest.fixture(scope="session")
def scripted_folder():
    """A tiny model fine-tuned on scripted conversations (cached; the first build takes one to two minutes of
    CPU): the shell agent solving hello-file (the right command, then "Done."); a judge grading that run
    against hello-file's rubric with JUDGE_REPLY; the compiler's planner (PLAN) and writer (WRITTEN) on SKILL."""
    from trajkit.envs.harbor.rubric import judge_messages
    from trajkit.envs.harbor.shell_agent import SYSTEM
    from trajkit.envs.harbor.task import load_task
    from trajkit.recipes.scripted import ScriptedRecipe, scripted_model

    task = load_task(SHIPPED / "hello-file")
    agent = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task.instruction},
             {"role": "assistant", "content": SOLVE}, {"role": "user", "content": "exit code: 0\n"},
             {"role": "assistant", "content": "Done."}]
    rubric = (task.tests_dir / "rubric.md").read_text()
    judge = judge_messages(task, rubric, SHELL_OUTPUT) + [{"role": "assistant", "content": JUDGE_REPLY}]
    from trajkit.envs.harbor.compile import PLANNER_SYSTEM, writer_messages

    skill = SKILL.read_text()
    planner = [{"role": "system", "content": PLANNER_SYSTEM.format(n=2)}, {"role": "user", "content": skill},
               {"role": "assistant", "content": "\n".join(PLAN)}]
    writers = [writer_messages(skill, t) + [{"role": "assistant", "content": WRITTEN[t]}] for t in PLAN]
    conversations = [agent, judge, planner, *writers]
    return scripted_model([(c, None) for c in conversations], ScriptedRecipe(steps=100, vocab_size=768))


@pytest.fixture
def scripted_policy(scripted_folder):
    """(model, tokenizer) of :func:`scripted_folder`, freshly loaded."""
    from trajkit.models.load import load_model, load_tokenizer

    return load_model(scripted_folder / "model"), load_tokenizer(scripted_folder / "tokenizer")


@pytest.fixture
def policy_folder(scripted_folder, tmp_path):
    """The scripted policy as one Hugging Face folder (model and tokenizer files side by side), as
    ``--model`` and ``policy.path`` take it."""
    import shutil

    folder = tmp_path / "policy"
    shutil.copytree(scripted_folder / "model", folder)
    for f in (scripted_folder / "tokenizer").iterdir():
        shutil.copy(f, folder / f.name)
    return folder
