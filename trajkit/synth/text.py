"""Language for the synthetic trace generator: scenes (category, task, project vocabulary) and the prose
of assistant turns (think text, narration, final answers) and of context-summary turns.

Everything is template text written for trajkit and filled from a per-row ``random.Random``; nothing here
counts anything. The only contract is negative: no generated sentence contains ``<`` or ``>``, so think
text, narration and answers never hold anything a trace parser could mistake for a tag.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

_PROJECTS = (("ledger-api", "python", "ledger"), ("atlas-etl", "python", "atlas"), ("nimbus-auth", "python", "nimbus"),
             ("quill-notes", "node", "quill"), ("orbit-dashboard", "node", "orbit"), ("pico-cache", "rust", "pico"),
             ("harbor-cli", "go", "harbor"), ("tern-scheduler", "go", "tern"))
_MODULES = ("config", "storage", "auth", "scheduler", "parser", "client", "cache", "routes", "models", "export",
            "retry", "metrics", "billing", "sync")
_LIBS = {"python": ("fastapi", "pydantic", "sqlalchemy", "celery", "httpx", "pandas"),
         "node": ("react", "express", "zod", "prisma", "vite"),
         "rust": ("tokio", "serde", "reqwest", "clap"), "go": ("cobra", "gin", "gorm", "zap")}
_FILE_PATTERNS = {"python": ("src/{pkg}/{mod}.py", "tests/test_{mod}.py", "src/{pkg}/__init__.py"),
                  "node": ("src/{mod}.ts", "src/components/{Mod}Panel.tsx", "tests/{mod}.test.ts"),
                  "rust": ("src/{mod}.rs", "tests/{mod}_it.rs", "src/lib.rs"),
                  "go": ("internal/{mod}/{mod}.go", "internal/{mod}/{mod}_test.go", "cmd/{pkg}/main.go")}
_MANIFEST = {"python": "pyproject.toml", "node": "package.json", "rust": "Cargo.toml", "go": "go.mod"}
_TOPICS = (("PostgreSQL logical replication", "Debezium change data capture"),
           ("SQLite WAL mode", "PostgreSQL for small apps"), ("Python free-threaded builds", "multiprocessing pools"),
           ("Kubernetes pod disruption budgets", "node affinity rules"), ("WebGPU", "WebGL 2"),
           ("HTTP/3", "HTTP/2 with TLS 1.3"), ("uv", "pip-tools"), ("DuckDB", "Polars"),
           ("OpenTelemetry tracing", "Prometheus exemplars"), ("Rust async closures", "boxed futures"),
           ("Terraform state locking", "Pulumi stacks"), ("Redis Streams", "Kafka topics"))
_SITES = ("https://status.example.net", "https://shop.example.com/catalog", "https://blog.example.org",
          "https://forms.example.io/contact", "https://docs.example.dev/versions", "https://jobs.example.co/board")
_THINGS = ("deployment config", "nginx reverse proxy settings", "backup cron job", "staging database credentials "
           "layout", "release checklist", "docker compose file")
_PREFS = ("short answers with the commands first", "tabs over spaces in Go files", "pytest over unittest",
          "British spelling in docs", "dark-mode screenshots")
_DECISIONS = ("the caching strategy", "the release cadence", "the logging format", "the database migration tool")

# category -> subcategory -> (task templates, tool weight boosts)
TASKS: dict[str, dict[str, tuple[tuple[str, ...], dict[str, float]]]] = {
    "Terminal & Coding": {
        "Debugging": (("Find out why the {module} tests in {project} started failing after the last commit and fix it",
                       "The {project} service crashes on startup with a {lib} import error; track it down",
                       "Fix the off-by-one bug in {file} that drops the last record of each batch"), {"terminal": 2}),
        "Build & Dependencies": (("Upgrade {lib} in {project} to the latest minor version and make sure the build "
                                  "still passes", "Get {project} building again on a clean checkout",
                                  "Pin the {lib} version in {project} so the nightly build stops breaking"),
                                 {"terminal": 3}),
        "Refactoring": (("Split the {module} logic in {file} into smaller functions without changing behaviour",
                         "Remove the dead code paths in {file} and keep the tests green"), {"patch": 2}),
        "Testing": (("Add unit tests for the {module} module in {project} covering the error paths",
                     "Make the flaky {module} integration test in {project} deterministic"), {"write_file": 1}),
    },
    "File Operations": {
        "File Editing": (("Update the {module} section of {config_file} to use the new endpoint and keep the comments",
                          "Add a changelog entry for the {module} fix in {project}"), {"patch": 2}),
        "Search & Navigation": (("Find every place in {project} that reads the {env_var} environment variable",
                                 "Locate where {project} defines its retry policy and tell me the defaults"),
                                {"search_files": 3}),
        "Config Management": (("Create a staging config for {project} based on the production one but with debug "
                               "logging", "Check that all YAML files under config/ in {project} are valid"),
                              {"write_file": 2}),
    },
    "Web Research": {
        "Fact Finding": (("Find out when {topic} became generally available and what changed since",
                          "What are the current limits of {topic}? Give me sources"), {"web_search": 2}),
        "Documentation Lookup": (("Look up how to configure {topic} and summarise the key options",
                                  "Find the official docs on {topic} and explain the migration steps"),
                                 {"web_extract": 2}),
        "Comparison": (("Compare {topic} with {alt_topic} for a small team and recommend one",
                        "Research the trade-offs between {topic} and {alt_topic}"), {"web_search": 1}),
    },
    "Browser Automation": {
        "Form Filling": (("Fill in the contact form on {site} with my details and submit it",
                          "Sign up for the newsletter on {site} using the email in my profile"), {"browser_type": 2}),
        "Site Navigation": (("Go to {site} and find the pricing for the team plan",
                             "Check the status page at {site} and tell me if any incidents are open"),
                            {"browser_click": 1}),
        "Scraping": (("Collect the titles and dates of the latest ten posts on {site}",
                      "Extract the table of supported versions from {site}"), {"browser_snapshot": 2}),
    },
    "Agent Tools": {
        "Memory & Context": (("Look through past sessions for the {thing} we created for {project}",
                              "Remember that I prefer {preference} for future sessions",
                              "What did we decide about {decision} last time"), {"session_search": 3, "memory": 2}),
        "Task Planning": (("Plan the migration of {project} to {lib} as a checklist and start on the first step",
                           "Break down the release of {project} v{version} into tasks and track progress"),
                          {"todo": 4}),
        "Delegation": (("Research {topic} in parallel with fixing the {module} bug in {project}",
                        "Have a sub-agent audit {project} for hard-coded secrets while you update the docs"),
                       {"delegate_task": 4}),
        "Clarification": (("Set up a new project for me", "Clean up the old files in the workspace"),
                          {"clarify": 4}),
    },
    "Data Analysis": {
        "CSV & Spreadsheets": (("Compute monthly revenue by region from {data_file}",
                                "Find duplicate customer records in {data_file}"), {"execute_code": 2}),
        "Log Analysis": (("Summarise the error rate per hour in {log_file}",
                          "Find the slowest endpoints in {log_file}"), {"search_files": 1, "terminal": 1}),
        "Scripting": (("Write a script that converts {data_file} to Parquet and report the row count",
                       "Plot the daily active users from {data_file} and save the chart"), {"write_file": 2}),
    },
}
CATEGORY_WEIGHTS = {"Terminal & Coding": 0.3, "File Operations": 0.15, "Web Research": 0.2,
                    "Browser Automation": 0.08, "Agent Tools": 0.15, "Data Analysis": 0.12}
BASE_TOOL_WEIGHTS: dict[str, dict[str, float]] = {
    "Terminal & Coding": {"terminal": 5, "read_file": 4, "search_files": 3, "patch": 3, "write_file": 1,
                          "execute_code": 1, "web_search": 1, "todo": 0.5, "process": 0.3},
    "File Operations": {"read_file": 4, "search_files": 4, "write_file": 3, "patch": 3, "terminal": 2,
                        "execute_code": 1},
    "Data Analysis": {"execute_code": 5, "read_file": 3, "terminal": 2, "write_file": 1.5, "search_files": 1},
    "Web Research": {"web_search": 5, "web_extract": 4, "browser_navigate": 1, "browser_snapshot": 0.5,
                     "execute_code": 0.5, "write_file": 0.5, "memory": 0.3},
    "Browser Automation": {"browser_navigate": 3, "browser_snapshot": 3, "browser_click": 3, "browser_type": 2,
                           "web_search": 1, "web_extract": 1},
    "Agent Tools": {"session_search": 2, "memory": 2, "todo": 1, "read_file": 1, "terminal": 1, "web_search": 1,
                    "search_files": 1},
}
_EXTRA_ASKS = ("", "", " I need it again.", " Please keep the changes minimal.", " Thanks!",
               " Let me know what you find.", " Be careful not to touch anything unrelated.")


def pick(rng: random.Random, seq):
    """``rng.choice`` without its rejection loop: one ``random()`` draw (bias < 2**-50)."""
    return seq[int(rng.random() * len(seq))]


@dataclass
class Scene:
    """What one synthetic row is about: its labels, task and the names its tool calls refer to."""

    category: str
    subcategory: str
    task: str
    human: str
    project: str
    lang: str
    pkg: str
    lib: str
    modules: list[str]
    files: list[str]
    topic: str
    alt_topic: str
    site: str
    data_file: str
    log_file: str
    tools: tuple[str, ...] = ()
    weights: dict[str, float] = field(default_factory=dict)

    @property
    def manifest(self) -> str:
        return _MANIFEST[self.lang]


def make_scene(rng: random.Random) -> Scene:
    """Draw a category, subcategory, task and the vocabulary the row's calls will use."""
    cats = list(CATEGORY_WEIGHTS)
    category = rng.choices(cats, weights=[CATEGORY_WEIGHTS[c] for c in cats])[0]
    subcategory = pick(rng, list(TASKS[category]))
    templates, boosts = TASKS[category][subcategory]
    project, lang, pkg = pick(rng, _PROJECTS)
    modules = rng.sample(_MODULES, 4)
    files = list(dict.fromkeys(pick(rng, _FILE_PATTERNS[lang]).format(pkg=pkg, mod=m, Mod=m.capitalize())
                               for m in modules))
    files += [p.format(pkg=pkg, mod=m, Mod=m.capitalize()) for m in modules for p in _FILE_PATTERNS[lang][:1]
              if p.format(pkg=pkg, mod=m, Mod=m.capitalize()) not in files][: max(0, 3 - len(files))]
    topic, alt = pick(rng, _TOPICS)
    slots = {"project": project, "module": modules[0], "lib": pick(rng, _LIBS[lang]), "file": files[0],
             "config_file": pick(rng, ("config/settings.yaml", "deploy/values.yaml", ".env.example")),
             "env_var": f"{pkg.upper()}_{modules[0].upper()}_URL", "topic": topic, "alt_topic": alt,
             "site": pick(rng, _SITES), "thing": pick(rng, _THINGS), "preference": pick(rng, _PREFS),
             "decision": pick(rng, _DECISIONS), "version": f"{rng.randint(1, 4)}.{rng.randint(0, 12)}.0",
             "data_file": f"data/{pick(rng, ('sales_2025', 'customers', 'events', 'orders_q3'))}.csv",
             "log_file": f"logs/{pick(rng, ('api', 'worker', 'gateway'))}-{rng.randint(1, 28):02d}.log"}
    task = pick(rng, templates).format(**slots)
    weights = dict(BASE_TOOL_WEIGHTS[category])
    for name, extra in boosts.items():
        weights[name] = weights.get(name, 0.0) + extra
    human = task + ("?" if task.startswith("What") else ".") + pick(rng, _EXTRA_ASKS)
    return Scene(category, subcategory, task, human, project, lang, pkg, slots["lib"], modules, files, topic,
                 alt, slots["site"], slots["data_file"], slots["log_file"], weights=weights)


# ---- think text -------------------------------------------------------------------------------------------
_OPENERS = ("The user wants me to {t}.", "The user is asking me to {t}.", "So the task is to {t}.",
            "I need to {t}.")
_INTENT = {  # tool -> (kimi variants, glm variants); {a} is the call's main argument
    "terminal": (("Let me run `{a}` to see what the current state is.",
                  "I'll run `{a}` and look carefully at the output before changing anything."),
                 ("Run `{a}`.", "Let me run `{a}`.")),
    "read_file": (("Let me read {a} to understand how this part is structured.",
                   "I should look at {a} first, since that is where the logic most likely lives."),
                  ("Let me read {a}.", "Check {a}.")),
    "write_file": (("I'll write the new content to {a} now that I know what it should contain.",),
                   ("Write {a}.",)),
    "patch": (("Now I can make the edit in {a}, replacing only the lines that need to change.",),
              ("Patch {a}.", "Apply the fix to {a}.")),
    "search_files": (("Let me search for `{a}` across the codebase to find every place that uses it.",),
                     ("Search for `{a}`.",)),
    "web_search": (("I'll search the web for {a} to find authoritative sources.",
                    "A web search for {a} should surface the official documentation."),
                   ("Search for {a}.",)),
    "web_extract": (("Let me extract the content of {a} to read the details.",), ("Read {a}.",)),
    "browser_navigate": (("I'll open {a} in the browser and see what the page shows.",), ("Open {a}.",)),
    "browser_snapshot": (("Let me take a snapshot of the page to see the available elements.",),
                         ("Take a snapshot.",)),
    "browser_click": (("I'll click element {a}, which looks like the right control.",), ("Click {a}.",)),
    "browser_type": (("Now I'll type into field {a}.",), ("Type into {a}.",)),
    "execute_code": (("A short Python script is the easiest way to process this, so let me run one.",),
                     ("Run a quick script.",)),
    "memory": (("This is worth remembering for future sessions, so I'll save it to memory.",),
               ("Save this to memory.",)),
    "session_search": (("Let me search past sessions for {a}.",), ("Search past sessions for {a}.",)),
    "clarify": (("This is ambiguous enough that I should ask the user before guessing.",), ("Ask the user.",)),
    "todo": (("I'll set up a todo list to keep track of the steps.",), ("Update the todo list.",)),
    "delegate_task": (("This subtask is self-contained, so I can delegate it to a sub-agent.",),
                      ("Delegate this part.",)),
    "process": (("Let me check on the background process.",), ("Check the process.",)),
}
_REACT_OK = (("Good, that gives me what I needed.", "The output looks as expected.",
              "That confirms my suspicion about where the problem is.", "Now I have a clearer picture."),
             ("Good.", "OK, that worked.", "Got it."))
_REACT_FAIL = (("That failed: {e}. I need to take a different approach.",
                "Hmm, the {tool} call returned an error ({e}). Let me think about why."),
               ("That failed: {e}.", "Error from {tool}."))
_REACT_NONZERO = (("The command exited with a non-zero status, so something is still wrong.",),
                  ("Non-zero exit, something is off.",))
_REACT_SILENT = (("I did not get a result back for that, so I'll continue from what I know.",),
                 ("No result, moving on.",))
_FILLERS = (
    "Before changing anything I want to confirm where {module} is configured.",
    "If this works, I can summarise the change for the user with the exact files involved.",
    "There might be another place that depends on this behaviour, so I should keep an eye out for it.",
    "The user did not specify a version, so I will assume the latest stable one.",
    "It is important not to break the existing behaviour of {project} while doing this.",
    "I should double-check the edge case where the input is empty.",
    "Maybe the {lib} version changed recently and that explains the difference.",
    "Let me think about what the most likely cause is before running more commands.",
    "The simplest explanation is usually right, so I will start with the obvious candidate.",
    "I also want to make sure the {module} module still behaves correctly afterwards.",
    "Once I have the facts I can write a clear answer with the sources.",
    "This should not take many more steps if my reading of the situation is right.",
    "It would be good to verify the result independently rather than trusting one output.",
    "I need to be careful with the paths here because the workspace root may differ.",
    "The earlier output mentioned {module}, which is a useful hint.",
    "Hmm, wait. Let me reconsider whether this is really the right file to look at.",
    "If the first approach does not work, the fallback is to inspect the logs directly.",
    "Keeping the change small makes it easier for the user to review.",
    "I will note the relevant details so the final answer is complete.",
    "There is no need to ask the user about this; a sensible default is fine.",
    "Actually, the documentation for {lib} might describe this exact situation.",
    "I want to avoid repeating work that has already been done in this session.",
)


def _intent_arg(args: dict | None) -> str:
    if not args:
        return "it"
    for key in ("command", "path", "pattern", "query", "url", "ref", "urls", "goal", "question"):
        value = args.get(key)
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str) and value:
            return value if len(value) <= 80 else value[:77] + "..."
    return "it"


def think_text(rng: random.Random, scene: Scene, kimi: bool, budget: int, reaction: tuple | None,
               calls: list[tuple[str, dict | None]], first: bool) -> str:
    """Think text of about ``budget`` words (0 gives ""): a reaction to the last results, the intent behind
    this turn's calls, then filler reasoning. ``reaction`` is (kind, tool, error) or None."""
    if budget <= 0:
        return ""
    s = 0 if kimi else 1
    parts: list[str] = []
    if first:
        t = scene.task[0].lower() + scene.task[1:]
        parts.append(pick(rng, _OPENERS).format(t=t.rstrip("?")))
    if reaction is not None:
        kind, tool, err = reaction
        bank = {"ok": _REACT_OK, "fail": _REACT_FAIL, "nonzero": _REACT_NONZERO, "silent": _REACT_SILENT}[kind]
        parts.append(pick(rng, bank[s]).format(e=err, tool=tool))
    for name, args in calls[:2]:
        bank = _INTENT.get(name)
        if bank:
            parts.append(pick(rng, bank[s]).format(a=_intent_arg(args)))
    words = sum(len(p.split()) for p in parts)
    fill = {"module": scene.modules[0], "project": scene.project, "lib": scene.lib}
    while words < budget - 7:
        sentence = pick(rng, _FILLERS).format(**fill)
        parts.append(sentence)
        words += len(sentence.split())
    text = " ".join(parts)
    return " " + text if kimi else text


_NARRATION = ("Let me check that first.", "Now I'll make the change.", "Running the checks again.",
              "Let me look at the details.", "I'll gather a bit more information.", "Next step.",
              "Let me verify this.", "Searching for more context.")


def narration(rng: random.Random) -> str:
    return pick(rng, _NARRATION)


def final_answer(rng: random.Random, scene: Scene, kimi: bool, failures: int) -> str:
    """The closing assistant message: a short markdown summary of the (synthetic) work."""
    head = pick(rng, ("Done.", "Here is what I found.", "All set.", "Summary of the work:"))
    bullets = [f"- Looked at `{scene.files[0]}` and the {scene.modules[0]} module in **{scene.project}**.",
               f"- The relevant setting lives in `{scene.manifest}`; {scene.lib} is used for {scene.modules[1]}.",
               f"- Sources checked: {scene.topic} documentation and release notes."]
    if failures:
        bullets.append(f"- {failures} step(s) failed along the way; I worked around them as described above.")
    rng.shuffle(bullets)
    body = "\n".join(bullets[: (4 if kimi else 2)])
    tail = pick(rng, ("Let me know if you want me to go further.", "Anything else you need?", ""))
    return f"{head}\n\n{body}" + (f"\n\n{tail}" if tail else "")


def context_summary(scene: Scene, compressed_turns: int) -> str:
    """A human turn in the form written by Hermes trajectory compression."""
    return ("[CONTEXT SUMMARY]: The assistant is working on the task: " + scene.task + ". In the "
            f"{compressed_turns} compressed turns it inspected {scene.files[0]} and {scene.files[1]}, ran the "
            f"{scene.modules[0]} checks and noted that {scene.lib} is involved. Remaining: verify the result and "
            "report back to the user.")
