"""A stand-in agent harness run as a shell command by the agent-task tests: two chat turns with the official
``openai`` client (``OPENAI_BASE_URL``/``OPENAI_API_KEY`` from the environment), asking for sampling settings
the gateway must override; prints the final reply. ``python agent_harness.py TASK``."""
import sys

import openai

sys.stdout.reconfigure(encoding="utf-8", newline="\n")  # the reply's characters as they are, whatever the locale

client = openai.OpenAI(max_retries=0)
model = client.models.list().data[0].id
messages = [{"role": "user", "content": sys.argv[1]}]
first = client.chat.completions.create(model=model, messages=messages, temperature=0.3, top_p=0.8)
messages += [{"role": "assistant", "content": first.choices[0].message.content or ""},
             {"role": "user", "content": "Once more."}]
second = client.chat.completions.create(model=model, messages=messages, temperature=0.3, top_p=0.8)
print(second.choices[0].message.content or "")
