"""trajkit's built-in shell agent: a loop over an OpenAI-compatible chat endpoint that runs the model's shell
commands (standard library only: it runs inside the sandbox, against the gateway through the relay).

Each turn the model sees the conversation (the system prompt below, the task's instruction, then each command's
exit code and output) and answers; the first fenced code block of its reply (```` ```bash ````, ```` ```sh ````
or a bare fence) is run with ``sh -c`` in the working directory, its output cut to ``--max-output``
characters. A reply without a code block ends the run, as do ``--max-turns`` replies. Prints one JSON line:
``{"turns": N, "commands": [...], "finish": "no_command" | "max_turns" | "error"}``.

    python3 shell_agent.py --base-url http://127.0.0.1:8000/v1 --api-key run-1 --model policy --task task.md
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import urllib.request

SYSTEM = ("You are a shell agent in a Linux sandbox. To run a command, reply with one fenced block:\n"
          "```bash\n<command>\n```\nYou will see its exit code and output. When the task is done, reply "
          "without a code block.")
BLOCK = re.compile(r"```(?:bash|sh|shell)?[ \t]*\n(.*?)```", re.DOTALL)


def command_of(reply: str) -> str | None:
    """The first fenced block's text, or None.

    >>> command_of("Sure.\\n```bash\\necho hi > /app/x\\n```\\nDone")
    'echo hi > /app/x\\n'
    >>> command_of("All done.") is None
    True
    """
    m = BLOCK.search(reply or "")
    return m.group(1) if m else None


def chat(base_url: str, api_key: str, model: str, messages: list[dict], timeout: float) -> str:
    body = json.dumps({"model": model, "messages": messages}).encode()
    request = urllib.request.Request(f"{base_url.rstrip('/')}/chat/completions", body, method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())["choices"][0]["message"].get("content") or ""


def run(args) -> dict:
    with open(args.task, encoding="utf-8") as fh:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": fh.read()}]
    commands, finish = [], "max_turns"
    for _ in range(args.max_turns):
        reply = chat(args.base_url, args.api_key, args.model, messages, args.request_timeout)
        messages.append({"role": "assistant", "content": reply})
        command = command_of(reply)
        if command is None:
            finish = "no_command"
            break
        try:
            done = subprocess.run(command, shell=True, capture_output=True, timeout=args.command_timeout, check=False)
            code, output = done.returncode, (done.stdout + done.stderr).decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            code, output = "timeout", ""
        commands.append({"command": command, "exit_code": code})
        messages.append({"role": "user", "content": f"exit code: {code}\n{output[-args.max_output:]}"})
    return {"turns": sum(m["role"] == "assistant" for m in messages), "commands": commands, "finish": finish}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", required=True)
    p.add_argument("--api-key", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--task", required=True, help="a file holding the instruction")
    p.add_argument("--max-turns", type=int, default=4)
    p.add_argument("--command-timeout", type=float, default=30.0)
    p.add_argument("--request-timeout", type=float, default=300.0)
    p.add_argument("--max-output", type=int, default=2000)
    print(json.dumps(run(p.parse_args(argv))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
