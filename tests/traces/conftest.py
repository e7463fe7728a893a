"""Hand-made Hermes rows shared by the traces tests (the real-data fixture ``real_row`` is in tests/conftest.py)."""
import json

TOOLS = [
    {"type": "function", "function": {"name": "terminal", "description": "Run a shell command.",
     "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
    {"type": "function", "function": {"name": "read_file", "description": "Read a file.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
]

SYSTEM = ("You are a function calling AI model. You are provided with function signatures within <tools> </tools> "
          "XML tags.\n<tools>\n" + json.dumps(TOOLS) + "\n</tools>\nEach function call should be enclosed within "
          "<tool_call> </tool_call> XML tags.\nExample:\n<tool_call>\n{'name': <function-name>,'arguments': "
          "<args-dict>}\n</tool_call>")


def call(name, args):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def resp(name, k, content):
    return "<tool_response>\n" + json.dumps({"tool_call_id": f"functions.{name}:{k}", "name": name,
                                              "content": content}) + "\n</tool_response>"


def quirky_row():
    """Every quirk in one row; the expected counts are derived by hand in test_parse.py."""
    conv = [
        ("system", SYSTEM),
        ("human", "Find b.txt and show it."),
        ("gpt", "<think>\n plan\n</think>\nI'll run two things.\n" + call("terminal", {"command": "ls"}) + "\n"
         + call("read_file", {"path": "a.txt"})),
        ("tool", resp("terminal", 0, {"output": "", "exit_code": 1, "error": None}) + "\n"
         + resp("read_file", 1, {"success": False, "error": "not found"})),
        ("gpt", "<think></think>\n<tool_call>\n{'name': 'read_file', 'arguments': {'path': 'b.txt'}}\n</tool_call>"),
        ("tool", resp("read_file", 2, "Error: bad call")),
        ("gpt", "<think>\nretry properly now\n</think>\n" + call("read_file", {"path": "b.txt"}) + "\n"
         + call("nonexistent", {})),
        ("tool", resp("read_file", 3, "contents of b")),
        ("gpt", "<think> a b c</think>" + call("nonexistent", {})),
        ("gpt", "<think>\nok\n</think>\nDone: <tool_call>\n" + json.dumps({"name": "terminal", "arguments": {"command": 5}})),
        ("tool", resp("terminal", 4, "") + "\n"
         + resp("terminal", 5, {"output": "x [OUTPUT TRUNCATED - 10 chars omitted out of 20 total]",
                                "exit_code": 0, "error": None})),
        ("tool", resp("terminal", 6, "fine")),
        ("human", "[CONTEXT SUMMARY]: we looked at b.txt"),
        ("gpt", "<think>\n one two\n</think>\nFinal answer."),
    ]
    return {"id": "quirky-1", "category": "Files", "subcategory": "Read", "task": "show b.txt",
            "conversations": [{"from": f, "value": v} for f, v in conv]}
