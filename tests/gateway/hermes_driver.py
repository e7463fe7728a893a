"""Run the Hermes Agent once against an OpenAI-compatible server (executed by the agent's own virtualenv's
Python, never imported by trajkit's tests): ``python hermes_driver.py BASE_URL SESSION MODEL TASK``.

Writes the agent's final response and its message list as JSON on stdout's last line; the agent saves its
trajectory (``trajectory_samples.jsonl``) in the working directory."""
import json
import sys

from run_agent import AIAgent

base_url, session, model, task = sys.argv[1:5]
agent = AIAgent(base_url=base_url, api_key=session, model=model, enabled_toolsets=["terminal"],
                save_trajectories=True, skip_context_files=True, quiet_mode=True, max_iterations=4)
result = agent.run_conversation(task)
print(json.dumps({"final_response": result.get("final_response"), "messages": result.get("messages"),
                  "completed": result.get("completed")}, default=str))
