"""A composed kind's data, Oracle and checks (:mod:`.compose`): :func:`draw` makes the input file and the
steps' parameters, :func:`command` the shell pipeline that solves it, :func:`checks` the verifier's literals.

Data are single words of one case pattern each (lower case; Title or UPPER case where a ``lower`` step needs
capitals), with repeats (so ``dedupe`` matters), spaces around some lines only where a ``strip`` step removes
them, integers for the numeric aggregates, and a three-column CSV (``name``, a number, a text column with
repeats) in a shuffled column order for ``column``.
"""
from __future__ import annotations

import random

from trajkit.envs.harbor.families.compose_grammar import Kind, Plan, select
from trajkit.envs.harbor.families.spec import Check

WORD_POOL = ["apple", "banana", "cherry", "date", "grape", "kiwi", "lemon", "mango", "melon", "olive", "peach",
             "pear", "plum", "quince", "berry", "lime", "papaya", "guava", "apricot", "orange", "fig", "nectarine"]
NAME_POOL = ["Ada", "Alan", "Grace", "Linus", "Barbara", "Ken", "Edsger", "Margaret", "Dennis", "Frances",
             "Radia", "Donald", "Hedy", "Guido", "Sophie", "Anita"]
TEXT_COLUMNS = {"city": ["paris", "lima", "oslo", "cairo", "quito", "dakar", "hanoi", "rome", "kyiv", "accra"],
                "team": ["red", "blue", "green", "amber", "teal", "violet", "coral", "indigo", "maroon", "slate"],
                "role": ["admin", "editor", "viewer", "owner", "guest", "auditor", "author", "tester", "support",
                         "analyst"]}
NUMBER_COLUMNS = ("age", "score", "points", "amount", "year")

# Every name an Oracle's command holds, as (train pool, held-out pool): a held-out instance's command names
# only held-out files, keys, headers and replacements, so it is no train command, and every 13 words of it hold
# one such name (none of its 13-grams is in train text: ``trajkit audit data``'s leak.ngram)
NAMES: dict[str, tuple[list[str], list[str]]] = {
    "src/words": (["words.txt", "items.txt", "list.txt", "fruit.txt"], ["input.txt", "data.txt", "basket.txt"]),
    "src/numbers": (["numbers.txt", "values.txt", "amounts.txt"], ["scores.txt", "readings.txt"]),
    "src/csv": (["people.csv", "staff.csv", "team.csv"], ["members.csv", "roster.csv"]),
    "out/text": (["result.txt", "out.txt", "selection.txt"], ["answer.txt", "report.txt"]),
    "out/json": (["result.json", "out.json", "selection.json"], ["answer.json", "report.json"]),
    "out/csv": (["result.csv", "out.csv", "summary.csv"], ["answer.csv", "report.csv"]),
    "key/count": (["count", "n"], ["lines"]), "key/sum": (["total"], ["sum"]), "key/max": (["max"], ["largest"]),
    "key/min": (["min"], ["smallest"]), "head": (["word", "value"], ["item", "entry"]),
    "new": (["zed", "xx", "qq"], ["wow", "yak", "zip"]), "dir": (["archive", "done"], ["processed", "old"]),
    "copy": (["{}.bak", "{}.orig"], ["backup-{}"]), "rename": (["{}.done", "{}.seen"], ["old-{}"]),
}


def _name(rng: random.Random, pool: str, split: str) -> str:
    return rng.choice(NAMES[pool][split == "heldout"])


def _styled(rng: random.Random, word: str, kind: Kind) -> str:
    return rng.choice([word.title(), word.upper()]) if kind.map == "lower" else word


def _pad(rng: random.Random, values: list[str]) -> list[str]:
    """Spaces before some values and after others; at least one of each."""
    out = [(" " * rng.randint(0, 2)) + v + (" " * rng.randint(0, 2)) for v in values]
    out[0], out[-1] = " " + out[0].lstrip(" "), out[-1].rstrip(" ") + "  "
    return out


def _words(rng: random.Random, kind: Kind) -> list[str]:
    """The source's word lines; a counting kind draws from wider ranges, so that no one count is a likely
    blind guess (a constant answer scores at most 1 in 4: ``test_compose``'s blind-guess ceiling)."""
    wide = kind.aggregate == "count"
    distinct = rng.sample(WORD_POOL, rng.randint(3, 12) if wide else rng.randint(5, 8))
    lines = distinct + rng.choices(distinct, k=rng.randint(1, 5) if wide else rng.randint(1, 3))
    rng.shuffle(lines)
    lines = [_styled(rng, w, kind) for w in lines]
    return _pad(rng, lines) if kind.map == "strip" else lines


def _csv(rng: random.Random, kind: Kind, params: dict) -> list[str]:
    number, text = rng.choice(NUMBER_COLUMNS), rng.choice(sorted(TEXT_COLUMNS))
    names = rng.sample(NAME_POOL, rng.randint(8, 12) if kind.aggregate == "count" else rng.randint(4, 7))
    pool = TEXT_COLUMNS[text]
    # the number of distinct values first (uniform, below the row count so a dedupe always matters), then the
    # rows: a distinct count is no likely blind guess
    values = rng.sample(pool, rng.randint(2, min(len(pool), len(names) - 1)))
    values += rng.choices(values, k=len(names) - len(values))
    rng.shuffle(values)
    columns = {"name": [_styled(rng, n, kind) for n in names], number: [str(rng.randint(1, 99)) for _ in names],
               text: values}
    if kind.map == "lower":
        chosen = "name"
    elif kind.numeric:
        chosen = number
    elif "dedupe" in kind.order or kind.aggregate == "count":
        chosen = text
    else:
        chosen = rng.choice(["name", text])
    if kind.map == "strip":
        columns[chosen] = _pad(rng, columns[chosen])
    header = list(columns)
    rng.shuffle(header)
    params["col"], params["column"] = header.index(chosen) + 1, chosen
    return [",".join(header)] + [",".join(columns[h][i] for h in header) for i in range(len(names))]


def _needle(rng: random.Random, lines: list[str]) -> str | None:
    """A one- or two-letter string in at least two lines and missing from at least two: the number of lines it
    is in drawn first, uniformly over the counts some string has, then a string in exactly that many,
    so the count of matching lines is no likely blind guess."""
    if len(lines) < 4:
        return None
    grams = {w[i:i + size] for w in lines for size in (1, 2) for i in range(len(w) - size + 1)}
    counts = {g: sum(g in w for w in lines) for g in sorted(grams) if g.isalpha()}
    reachable = sorted({c for c in counts.values() if 2 <= c <= len(lines) - 2})
    if not reachable:
        return None
    target = rng.choice(reachable)
    return rng.choice([g for g, c in counts.items() if c == target])


def draw(rng: random.Random, kind: Kind, split: str) -> Plan | None:
    """One draw of ``kind``'s inputs and parameters in ``split`` (None when this draw cannot fit the kind)."""
    params: dict = {}
    if kind.select == "column":
        src, lines = _name(rng, "src/csv", split), _csv(rng, kind, params)
    elif kind.numeric:
        src, lines = _name(rng, "src/numbers", split), [str(rng.randint(1, 99)) for _ in range(rng.randint(5, 9))]
    else:
        src, lines = _name(rng, "src/words", split), _words(rng, kind)
    if kind.select in ("match", "exclude"):
        params["needle"] = _needle(rng, lines)
        if params["needle"] is None:
            return None
    if kind.select in ("first", "last"):
        params["n"] = rng.randint(2, len(lines) - 2)
    plan = Plan(kind, src, lines, _name(rng, f"out/{kind.format}", split), params)
    if kind.map == "replace":
        grams = sorted({w[i:i + 2] for w in select(plan, kind.select) for i in range(len(w) - 1)
                        if w[i:i + 2].isalpha()})
        params["old"], params["new"] = rng.choice(grams), _name(rng, "new", split)
    _format_params(rng, kind, params, split)
    return plan


def _format_params(rng: random.Random, kind: Kind, params: dict, split: str) -> None:
    if kind.format == "json" and kind.aggregate:
        params["key"] = _name(rng, f"key/{kind.aggregate}", split)
    if kind.format == "csv":
        params["head"] = _name(rng, f"key/{kind.aggregate}" if kind.aggregate else "head", split)
    if kind.file == "append":
        params["existing"] = rng.sample(WORD_POOL, rng.randint(1, 3))
    elif kind.file in ("move", "copy", "rename"):
        params["dest"] = _name(rng, "dir" if kind.file == "move" else kind.file, split)


def dest(plan: Plan) -> str:
    """Where the file operation leaves the source: ``/app/...``."""
    if plan.kind.file == "move":
        return f"/app/{plan.params['dest']}/{plan.src}"
    return "/app/" + plan.params["dest"].format(plan.src)


# ``column``'s stage finds the column by its name in the header: the instruction names the column, the column
# order is shuffled, and an agent that has not read the file cannot know its number. An Oracle that cut field K
# (its number, known to the generator alone) taught a policy trained on its traces to guess one (a third of the
# guesses right with three columns; issue 44's tenth round). Written without spaces, so that every 13 words of a
# held-out command still hold a held-out name (module comment on NAMES above).
COLUMN_BY_NAME = "'NR==1{for(i=1;i<=NF;i++)if($i==col)c=i;next}{print $c}'"


def _select_stage(plan: Plan) -> str:
    p, src = plan.params, f"/app/{plan.src}"
    return {"lines": f"cat {src}", "match": f"grep -F '{p.get('needle')}' {src}",
            "exclude": f"grep -vF '{p.get('needle')}' {src}", "column": f"awk -F, -v col={p.get('column')} {COLUMN_BY_NAME} {src}",
            "first": f"head -n {p.get('n')} {src}", "last": f"tail -n {p.get('n')} {src}"}[plan.kind.select]


STAGES = {"upper": "tr 'a-z' 'A-Z'", "lower": "tr 'A-Z' 'a-z'", "strip": "sed 's/^ *//; s/ *$//'",
          "sort": "LC_ALL=C sort", "dedupe": "awk '!seen[$0]++'", "reverse": "tac", "count": "wc -l",
          "sum": "awk '{s += $1} END {print s}'", "max": "sort -n | tail -n 1", "min": "sort -n | head -n 1"}


def _format_stage(plan: Plan) -> str | None:
    k, p = plan.kind, plan.params
    if k.format == "json" and k.aggregate:
        return f"awk '{{print \"{{\\\"{p['key']}\\\": \" $1 \"}}\"}}'"
    if k.format == "json":
        return 'python3 -c "import json, sys; print(json.dumps(sys.stdin.read().splitlines()))"'
    if k.format == "csv":
        rows = "{print}" if k.aggregate else '{print NR "," $0}'
        return f"awk 'BEGIN {{print \"{'' if k.aggregate else 'index,'}{p['head']}\"}} {rows}'"
    return None


def command(plan: Plan) -> str:
    """The Oracle's command: ``select | map | order... | aggregate | format > out``, then the file operation."""
    k, p = plan.kind, plan.params
    stages = [_select_stage(plan)]
    stages += [f"sed 's/{p['old']}/{p['new']}/g'" if s == "replace" else STAGES[s]
               for s in [k.map, *k.order, k.aggregate] if s]
    stages += [s for s in [_format_stage(plan)] if s]
    line = " | ".join(stages) + (" >> " if k.file == "append" else " > ") + f"/app/{plan.out}"
    src = f"/app/{plan.src}"
    if k.file == "copy":
        line += f" && cp {src} {dest(plan)}"
    elif k.file == "move":
        line += f" && mkdir -p /app/{p['dest']} && mv {src} /app/{p['dest']}/"
    elif k.file == "rename":
        line += f" && mv {src} {dest(plan)}"
    return line


def rendered(plan: Plan, answer: list[str] | int) -> str | list | dict:
    """The output file's expected content: text (trailing newlines aside) or, for JSON, the parsed value."""
    k, p = plan.kind, plan.params
    if k.format == "json":
        return {p["key"]: answer} if k.aggregate else list(answer)
    if k.format == "csv":
        if k.aggregate:
            return f"{p['head']}\n{answer}"
        return "\n".join([f"index,{p['head']}"] + [f"{i},{v}" for i, v in enumerate(answer, 1)])
    lines = [str(answer)] if k.aggregate else list(answer)
    return "\n".join(p.get("existing", []) + lines)


def checks(plan: Plan, answer: list[str] | int) -> list[Check]:
    """The output's check (``number`` for a lone number, ``json``, else ``line``), then the file operation's."""
    k, out, want = plan.kind, f"/app/{plan.out}", rendered(plan, answer)
    lone = k.aggregate and k.format == "text" and k.file != "append"
    kind = "json" if k.format == "json" else "number" if lone else "line"
    found = [Check(kind, out, want)]
    original = "\n".join(plan.lines)
    if k.file == "copy":  # a copy: its own regular file (no link, no hard link), and the source kept
        found += [Check("line", dest(plan), original), Check("regular", dest(plan)),
                  Check("line", f"/app/{plan.src}", original)]
    elif k.file in ("move", "rename"):
        found += [Check("absent", f"/app/{plan.src}"), Check("line", dest(plan), original)]
    return found
