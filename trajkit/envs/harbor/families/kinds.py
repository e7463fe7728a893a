"""The task families: one function per family, ``(rng, wording) -> TaskSpec``, drawing its parameters from
small pools and wording its instruction with template ``wording`` of the family's :data:`WORDINGS`.

Each family is the kind of one of the shipped tasks (``trajkit/envs/tasks``) or a new one; the expected
answers are computed here, in Python, and written into the verifier as literals (:mod:`.spec`).
"""
from __future__ import annotations

import json
import random

from trajkit.envs.harbor.families.spec import Check, TaskSpec

NAMES = ["Ada", "Alan", "Grace", "Linus", "Barbara", "Ken", "Edsger", "Margaret", "Dennis", "Frances", "John",
         "Radia", "Donald", "Hedy", "Tim", "Katherine", "Guido", "Sophie", "Niklaus", "Anita"]
WORDS = ["apple", "banana", "cherry", "date", "fig", "grape", "kiwi", "lemon", "mango", "melon", "olive", "peach",
         "pear", "plum", "quince", "berry", "lime", "papaya", "guava", "apricot"]
STEMS = ["notes", "report", "summary", "draft", "log", "memo", "list", "data", "index", "record", "entry", "page"]
LEVELS = ["INFO", "WARN", "ERROR", "DEBUG"]
EVENTS = ["disk full", "user login", "cache miss", "request done", "retry scheduled", "job started",
          "connection reset", "config loaded", "timeout talking to db", "worker idle", "backup finished"]
GREETINGS = ["Hello", "Hi", "Welcome", "Good day", "Hey", "Greetings", "Howdy", "Good morning"]
PHRASES = ["the build is green", "all systems nominal", "deploy at noon", "coffee is ready", "tests pass",
           "the cache is warm", "ship it", "release candidate one", "maintenance at nine", "keep it simple"]


def _pick(rng: random.Random, pool: list, k: int | None = None):
    return rng.choice(pool) if k is None else rng.sample(pool, k)


def write_file(rng: random.Random, wording: int) -> TaskSpec:
    file, text = f"{_pick(rng, STEMS)}.txt", f"{_pick(rng, GREETINGS)}, {_pick(rng, NAMES)}!"
    instruction = WORDINGS["write-file"][wording].format(path=f"/app/{file}", text=text)
    return TaskSpec("write-file", {"file": file, "text": text}, instruction, {},
                    f"printf '%s\\n' '{text}' > /app/{file}", [Check("line", f"/app/{file}", text)], wording=wording)


def count_matches(rng: random.Random, wording: int) -> TaskSpec:
    log, out, level = f"{_pick(rng, ['server', 'app', 'worker', 'events', 'system'])}.log", \
        f"{_pick(rng, ['count', 'total', 'result', 'hits'])}.txt", _pick(rng, ["ERROR", "WARN", "DEBUG"])
    lines = [f"2026-01-{rng.randint(1, 28):02d} 10:{i:02d}:00 {_pick(rng, LEVELS):<5} {_pick(rng, EVENTS)}"
             for i in range(rng.randint(6, 14))]
    lines.append(f"2026-02-01 11:00:00 {level:<5} {_pick(rng, EVENTS)}")
    rng.shuffle(lines)
    n = sum(level in line for line in lines)
    instruction = WORDINGS["count-matches"][wording].format(log=f"/app/{log}", level=level, out=f"/app/{out}")
    return TaskSpec("count-matches", {"log": log, "out": out, "level": level, "lines": lines}, instruction,
                    {log: "\n".join(lines) + "\n"}, f"grep -c '{level}' /app/{log} > /app/{out}",
                    [Check("number", f"/app/{out}", str(n))], wording=wording)


def rename_ext(rng: random.Random, wording: int) -> TaskSpec:
    folder, (old, new) = _pick(rng, ["notes", "docs", "drafts", "pages", "inbox"]), \
        _pick(rng, ["txt", "log", "text", "dat", "md", "bak"], 2)
    stems, keep = sorted(_pick(rng, STEMS, rng.randint(2, 4))), f"keep.{_pick(rng, ['csv', 'json', 'cfg'])}"
    files = {f"{folder}/{s}.{old}": f"{s} {_pick(rng, WORDS)}\n" for s in stems}
    files[f"{folder}/{keep}"] = "x,y\n"
    checks = [Check("line", f"/app/{folder}/{s}.{new}", files[f"{folder}/{s}.{old}"].rstrip("\n")) for s in stems]
    checks += [Check("absent", f"/app/{folder}/{s}.{old}") for s in stems] + [Check("line", f"/app/{folder}/{keep}", "x,y")]
    instruction = WORDINGS["rename-ext"][wording].format(dir=f"/app/{folder}", old=old, new=new)
    return TaskSpec("rename-ext", {"dir": folder, "old": old, "new": new, "files": sorted(files)}, instruction,
                    files, f'cd /app/{folder} && for f in *.{old}; do mv "$f" "${{f%.{old}}}.{new}"; done',
                    checks, wording=wording)


def sort_lines(rng: random.Random, wording: int) -> TaskSpec:
    words = _pick(rng, WORDS, rng.randint(4, 7))
    lines = words + _pick(rng, words, rng.randint(1, 3))
    rng.shuffle(lines)
    src, out, reverse = f"{_pick(rng, ['words', 'fruit', 'items'])}.txt", \
        f"{_pick(rng, ['sorted', 'unique', 'clean'])}.txt", rng.random() < 0.5
    order = "reverse alphabetical" if reverse else "alphabetical"
    instruction = WORDINGS["sort-lines"][wording].format(src=f"/app/{src}", out=f"/app/{out}", order=order)
    return TaskSpec("sort-lines", {"src": src, "out": out, "reverse": reverse, "lines": lines}, instruction,
                    {src: "\n".join(lines) + "\n"}, f"sort -u{'r' if reverse else ''} /app/{src} > /app/{out}",
                    [Check("line", f"/app/{out}", "\n".join(sorted(set(lines), reverse=reverse)))], wording=wording)


def json_sum(rng: random.Random, wording: int) -> TaskSpec:
    field, src, out = _pick(rng, ["amount", "score", "size", "count", "cost"]), \
        f"{_pick(rng, ['order', 'items', 'batch', 'stock'])}.json", f"{_pick(rng, ['total', 'sum', 'result'])}.json"
    items = [{"name": _pick(rng, WORDS), field: rng.randint(1, 99)} for _ in range(rng.randint(2, 6))]
    instruction = WORDINGS["json-sum"][wording].format(src=f"/app/{src}", out=f"/app/{out}", field=field)
    code = (f"import json; items = json.load(open('/app/{src}')); "
            f"json.dump({{'total': sum(i['{field}'] for i in items)}}, open('/app/{out}', 'w'))")
    return TaskSpec("json-sum", {"src": src, "out": out, "field": field, "items": items}, instruction,
                    {src: json.dumps(items, indent=1) + "\n"}, f'python3 -c "{code}"',
                    [Check("json", f"/app/{out}", {"total": sum(i[field] for i in items)})], wording=wording)


def csv_to_json(rng: random.Random, wording: int) -> TaskSpec:
    number, other = _pick(rng, ["age", "year", "score", "rank"]), _pick(rng, ["city", "team", "role", "color"])
    src = f"{_pick(rng, ['people', 'staff', 'players', 'members'])}.csv"
    out = src.replace(".csv", ".json")
    rows = [{"name": n, number: rng.randint(1, 99), other: _pick(rng, WORDS)} for n in _pick(rng, NAMES, rng.randint(2, 4))]
    csv_text = f"name,{number},{other}\n" + "".join(f"{r['name']},{r[number]},{r[other]}\n" for r in rows)
    instruction = WORDINGS["csv-to-json"][wording].format(src=f"/app/{src}", out=f"/app/{out}", number=number)
    code = (f"import csv, json; rows = list(csv.DictReader(open('/app/{src}'))); "
            f"[r.update({number}=int(r['{number}'])) for r in rows]; json.dump(rows, open('/app/{out}', 'w'))")
    return TaskSpec("csv-to-json", {"src": src, "number": number, "other": other, "rows": rows}, instruction,
                    {src: csv_text}, f'python3 -c "{code}"', [Check("json", f"/app/{out}", rows)], wording=wording)


def greet_script(rng: random.Random, wording: int) -> TaskSpec:
    script = f"{_pick(rng, ['greet', 'hello', 'welcome', 'salute', 'hi', 'say-hello', 'greeter', 'wave'])}.sh"
    greeting, end = _pick(rng, GREETINGS), _pick(rng, ["!", ".", "?"])
    names = _pick(rng, NAMES, 3)
    instruction = WORDINGS["greet-script"][wording].format(path=f"/app/{script}", greeting=greeting, end=end,
                                                           example=names[0])
    solution = f"printf '#!/bin/sh\\necho \"{greeting}, $1{end}\"\\n' > /app/{script} && chmod +x /app/{script}"
    return TaskSpec("greet-script", {"script": script, "greeting": greeting, "end": end}, instruction, {}, solution,
                    [Check("run", f"/app/{script}", [[[n], f"{greeting}, {n}{end}"] for n in names])], wording=wording)


def env_value(rng: random.Random, wording: int) -> TaskSpec:
    var, value = f"APP_{_pick(rng, ['MODE', 'REGION', 'TIER', 'STAGE', 'COLOR', 'OWNER'])}", _pick(rng, WORDS + NAMES)
    out = f"{_pick(rng, ['value', 'setting', 'env', 'mode'])}.txt"
    instruction = WORDINGS["env-value"][wording].format(var=var, out=f"/app/{out}")
    return TaskSpec("env-value", {"var": var, "value": value, "out": out}, instruction, {},
                    f'echo "${var}" > /app/{out}', [Check("line", f"/app/{out}", value)], env={var: value},
                    wording=wording)


def count_lines(rng: random.Random, wording: int) -> TaskSpec:
    src, out = f"{_pick(rng, STEMS)}.txt", f"{_pick(rng, ['lines', 'length', 'n'])}.txt"
    lines = [_pick(rng, PHRASES) for _ in range(rng.randint(3, 15))]
    instruction = WORDINGS["count-lines"][wording].format(src=f"/app/{src}", out=f"/app/{out}")
    return TaskSpec("count-lines", {"src": src, "out": out, "lines": lines}, instruction, {src: "\n".join(lines) + "\n"},
                    f"wc -l < /app/{src} > /app/{out}", [Check("number", f"/app/{out}", str(len(lines)))],
                    wording=wording)


def upper_case(rng: random.Random, wording: int) -> TaskSpec:
    src, out = f"{_pick(rng, STEMS)}.txt", f"{_pick(rng, ['upper', 'loud', 'caps'])}.txt"
    lines = _pick(rng, PHRASES, rng.randint(1, 4))
    instruction = WORDINGS["upper-case"][wording].format(src=f"/app/{src}", out=f"/app/{out}")
    return TaskSpec("upper-case", {"src": src, "out": out, "lines": lines}, instruction, {src: "\n".join(lines) + "\n"},
                    f"tr 'a-z' 'A-Z' < /app/{src} > /app/{out}", [Check("line", f"/app/{out}", "\n".join(lines).upper())],
                    wording=wording)


# Per family: instruction templates. The LAST one is the held-out wording; the others are for training.
WORDINGS: dict[str, list[str]] = {
    "write-file": ["Create the file `{path}` whose whole content is the line `{text}` (with a final newline).",
                   "Write the text `{text}` followed by a newline into `{path}`.",
                   "Make `{path}` contain exactly one line: `{text}`.",
                   "I need a file at {path}. Put a single line in it reading {text} and nothing else."],
    "count-matches": ["`{log}` is a log file. Count the lines that contain the word `{level}` and write only that "
                      "number to `{out}`.",
                      "How many lines of `{log}` mention `{level}`? Write the count (just the number) to `{out}`.",
                      "Write to `{out}` the number of lines in `{log}` containing `{level}`.",
                      "Our log at {log} has entries of several severities. Find out how many entries carry the "
                      "{level} severity and save that figure, alone, in {out}."],
    "rename-ext": ["The folder `{dir}` holds `.{old}` files. Rename every one of them to the same name with the "
                   "extension `.{new}`, keeping their contents. Leave other files alone.",
                   "In `{dir}`, change the extension of each `*.{old}` file to `.{new}`; do not touch other files.",
                   "Rename all `.{old}` files under `{dir}` so they end in `.{new}` instead.",
                   "Some files in {dir} end with {old}. Give each of them the suffix {new} in place of {old}, "
                   "contents unchanged, and keep everything else as it is."],
    "sort-lines": ["`{src}` holds one word per line, with repeats. Write `{out}`: each distinct word once, in "
                   "{order} order, one per line.",
                   "Sort the lines of `{src}` in {order} order, drop duplicates, and save the result to `{out}`.",
                   "Write the distinct lines of `{src}` to `{out}`, sorted in {order} order.",
                   "Take the word list in {src}, remove repeated entries, arrange what is left in {order} "
                   "sequence and store it one entry per line in {out}."],
    "json-sum": ["`{src}` is a JSON list of objects, each with a `{field}` field. Write `{out}` holding a JSON object "
                 "with one key, `total`: the sum of the `{field}` values.",
                 "Add up the `{field}` of every object in the JSON list `{src}` and write `{{\"total\": SUM}}` to `{out}`.",
                 "Compute the sum of `{field}` over the objects in `{src}`; save it as JSON `{{\"total\": ...}}` in `{out}`.",
                 "The records in {src} each carry a {field} number. Produce {out}, a JSON object whose only key "
                 "total maps to the grand total of those numbers."],
    "csv-to-json": ["Convert `{src}` (a header row, then one record per row) to `{out}`: a JSON list with one object "
                    "per row, keys from the header, and the `{number}` column as an integer.",
                    "Turn the CSV file `{src}` into a JSON array of objects in `{out}` (header names as keys; "
                    "`{number}` as a number).",
                    "Write `{out}`: the rows of `{src}` as JSON objects keyed by the header, with `{number}` an integer.",
                    "Please translate the table in {src} into {out}. Each data row should become a JSON object "
                    "named by the columns, where {number} holds an integer rather than text."],
    "greet-script": ["Write an executable shell script `{path}` that takes one argument NAME and prints "
                     "`{greeting}, NAME{end}` on one line. For example `{path} {example}` prints "
                     "`{greeting}, {example}{end}`.",
                     "Create `{path}`, an executable script: given a name as its argument it prints `{greeting}, "
                     "<name>{end}`. So `{path} {example}` outputs `{greeting}, {example}{end}`.",
                     "Make an executable `{path}` that greets its first argument with `{greeting}, ARG{end}`.",
                     "We want a small program at {path} that people can run with a name after it; it should "
                     "answer with the greeting {greeting} followed by a comma, the name and the mark {end} "
                     "as in {greeting}, {example}{end} for {example}. Remember to make it runnable."],
    "env-value": ["Write the value of the environment variable `{var}` (set in this environment) followed by a "
                  "newline to `{out}`.",
                  "Save the value of `${var}` to `{out}`.",
                  "Put the contents of the environment variable `{var}` into the file `{out}`.",
                  "This machine defines {var} in its environment. Record what it is set to in {out}, on a line "
                  "of its own."],
    "count-lines": ["Count the lines of `{src}` and write only that number to `{out}`.",
                    "How many lines does `{src}` have? Write the number to `{out}`.",
                    "Write the line count of `{src}` to `{out}`.",
                    "Work out how long {src} is in lines and store just that figure in {out}."],
    "upper-case": ["Write `{out}`: the text of `{src}` in upper case.",
                   "Convert `{src}` to capital letters and save the result as `{out}`.",
                   "Save an upper-cased copy of `{src}` to `{out}`.",
                   "Produce {out} holding everything from {src} but with every letter capitalised."],
}
