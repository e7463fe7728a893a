"""The instructions of composed kinds (:mod:`.compose`): one phrase per step, joined by a frame.

Every primitive has seven phrasings and there are four frames (a sentence, a list of clauses, numbered steps,
a request in prose). Phrasing and frame ``3`` are the held-out wording, as for the hand-written families: no
train instruction holds any of its phrases. A held-out instruction uses phrasing ``3`` of every step and frame
``3``. A train instruction of wording ``w`` uses frame ``w``, and each of its clauses a train phrasing drawn on
its own from the first ``phrasings`` of :data:`TRAIN_PHRASINGS`, with names quoted one way throughout
(backticks, single or double quotes, or bare, as the held-out phrasings give them): several phrasings a clause
and 4 quotings instead of one fixed text a frame, so that a policy learns to read the steps, not one
template's wording and punctuation. Phrasings 0-2 are imperative and technical; 4-6 say the same in other
registers (a request, a filter, a statement of what the result must be) and are drawn only when ``phrasings``
exceeds 3, so that the wording an RL stage trains on can be wider than the SFT data's.
"""
from __future__ import annotations

import random

from trajkit.errors import ConfigError

WORDING_COUNT = 4  # frames; the last is the held-out one
HELDOUT_PHRASING = 3  # every clause's held-out phrasing (its pool's index)
TRAIN_PHRASINGS = (0, 1, 2, 4, 5, 6)  # the train phrasings, in the order ``phrasings`` admits them
DEFAULT_PHRASINGS = 3
QUOTES = ("`", "'", '"', "")  # how a train instruction marks its names and values

STEP: dict[str, list[str]] = {
    "lines": [
        "take every line of `{src}`",
        "start from all the lines of `{src}`",
        "read the lines of `{src}`",
        "go through everything in {src}",
        "use `{src}` as it is, every line of it",
        "I want all of `{src}`, line by line",
        "the input is the full content of `{src}`",
    ],
    "match": [
        "take the lines of `{src}` that contain `{needle}`",
        "keep only the lines of `{src}` containing `{needle}`",
        "select the lines in `{src}` with `{needle}` in them",
        "pick out whichever lines of {src} include the letters {needle}",
        "only the lines where `{needle}` shows up in `{src}` matter",
        "filter `{src}` down to lines having `{needle}`",
        "the input is each line of `{src}` that has `{needle}` somewhere in it",
    ],
    "exclude": [
        "take the lines of `{src}` that do not contain `{needle}`",
        "drop every line of `{src}` containing `{needle}` and keep the rest",
        "select the lines in `{src}` without `{needle}`",
        "set aside the lines of {src} that include {needle} and work with the others",
        "filter out of `{src}` any line with `{needle}` in it",
        "I only want the lines of `{src}` where `{needle}` is absent",
        "the input is each line of `{src}` lacking `{needle}`",
    ],
    "column": [
        "take the values of the `{col}` column of the CSV file `{src}` (not the header)",
        "read the `{col}` field of every data row of `{src}`",
        "extract column `{col}` from `{src}`, header excluded",
        "look at the {col} entry of each record in the table {src}",
        "pull the `{col}` values out of the CSV `{src}`, skipping the header row",
        "for every row of the CSV `{src}` below its header, I want the `{col}` value",
        "the input is the `{col}` column of the comma-separated file `{src}`, without its title",
    ],
    "first": [
        "take the first {n} lines of `{src}`",
        "keep only the top {n} lines of `{src}`",
        "select lines 1 to {n} of `{src}`",
        "consider just the opening {n} lines of {src}",
        "only the leading {n} lines of `{src}` count",
        "grab the initial {n} lines from `{src}`",
        "the input is lines 1 through {n} of `{src}`",
    ],
    "last": [
        "take the last {n} lines of `{src}`",
        "keep only the final {n} lines of `{src}`",
        "select the bottom {n} lines of `{src}`",
        "consider just the closing {n} lines of {src}",
        "only the trailing {n} lines of `{src}` count",
        "grab the {n} lines at the end of `{src}`",
        "the input is the last {n} lines of `{src}`, in their order",
    ],
    "upper": [
        "convert them to upper case",
        "make every letter a capital",
        "upper-case them",
        "turn all their letters into capitals",
        "capitalise every letter",
        "change their letters to uppercase",
        "every letter becomes an upper-case one",
    ],
    "lower": [
        "convert them to lower case",
        "make every letter small",
        "lower-case them",
        "turn all their letters into small ones",
        "make them all lowercase",
        "change their letters to lowercase",
        "every letter becomes a lower-case one",
    ],
    "replace": [
        "replace every `{old}` in them with `{new}`",
        "change each occurrence of `{old}` to `{new}`",
        "substitute `{new}` for `{old}` everywhere",
        "wherever the text {old} appears put {new} in its place",
        "swap `{old}` for `{new}` wherever it occurs",
        "every time `{old}` occurs, write `{new}` instead",
        "each `{old}` is replaced by `{new}`",
    ],
    "strip": [
        "remove the spaces at the start and end of each line",
        "trim leading and trailing spaces from every line",
        "strip the surrounding spaces from each line",
        "get rid of any blanks before or after the text on each line",
        "trim the whitespace at both ends of each line",
        "cut the spaces off both ends of each line",
        "each line loses its leading and trailing spaces",
    ],
    "sort": [
        "sort them in alphabetical (byte) order",
        "put them in ascending alphabetical order",
        "sort them A to Z",
        "arrange them alphabetically",
        "order them alphabetically by byte value",
        "sort them in plain ascending order",
        "they are to be sorted ascending, as bytes",
    ],
    "dedupe": [
        "drop repeated lines, keeping the first occurrence of each",
        "remove duplicates (keep each line's first appearance, in order)",
        "keep only the first copy of any line that repeats",
        "make sure no line shows up twice by leaving only the earliest of each",
        "remove repeats so each distinct line appears once, first occurrence kept, order preserved",
        "delete duplicate lines but keep the original order of the first copies",
        "each distinct line is kept once, where it first occurs",
    ],
    "reverse": [
        "reverse their order, last line first",
        "flip the order so the last line comes first",
        "put them in reverse order",
        "turn the sequence around so it runs from the end back to the start",
        "invert their order",
        "list them from the last back to the first",
        "their order is reversed",
    ],
    "count": [
        "count them",
        "work out how many there are",
        "count the lines",
        "find how many lines that leaves",
        "get the number of lines",
        "tally the lines",
        "the result is how many lines there are",
    ],
    "sum": [
        "add the numbers up",
        "compute their sum",
        "total them",
        "find what they add up to",
        "sum the numbers",
        "add all the values together",
        "the result is the total of the numbers",
    ],
    "max": [
        "find the largest number",
        "take the maximum",
        "pick the biggest value",
        "find the highest of them",
        "get the maximum value",
        "determine the greatest number",
        "the result is the largest value",
    ],
    "min": [
        "find the smallest number",
        "take the minimum",
        "pick the lowest value",
        "find the least of them",
        "get the minimum value",
        "determine the least number",
        "the result is the smallest value",
    ],
}
WRITE: dict[str, list[str]] = {  # (format, lines or number, written or appended)
    "text/lines": [
        "write the result to `{out}`, one per line",
        "save them to `{out}`, one line each",
        "store the lines in `{out}`",
        "put the outcome in {out} with one entry per line",
        "output them to `{out}` with each on its own line",
        "the result goes into `{out}`, line by line",
        "`{out}` must end up holding them, one per line",
    ],
    "text/number": [
        "write just the number to `{out}`",
        "save the number alone in `{out}`",
        "store the figure in `{out}`",
        "put only that figure in {out}",
        "output only the number to `{out}`",
        "the number, and nothing else, goes in `{out}`",
        "`{out}` must end up holding just that number",
    ],
    "json/lines": [
        "write the result to `{out}` as a JSON list of strings",
        "save them to `{out}` as a JSON array of strings, in order",
        "store them in `{out}` as a JSON list",
        "put them in {out} as a JSON array whose items are the lines as strings",
        "output them to `{out}` as a JSON array of strings",
        "the result goes into `{out}` as JSON: a list with one string per line",
        "`{out}` must end up holding a JSON list of those lines as strings",
    ],
    "json/number": [
        'write `{out}` as the JSON object `{{"{key}": N}}` with the number as N',
        'save `{{"{key}": N}}` to `{out}`, N being the number',
        "store the number in `{out}` as JSON: an object with the single key `{key}`",
        "put it in {out} as a JSON object whose only key is {key}",
        'output `{{"{key}": N}}` to `{out}`, where N is the number',
        "the number goes in `{out}` as JSON under the key `{key}`, nothing else in the object",
        "`{out}` must end up holding a JSON object with one key, `{key}`, set to the number",
    ],
    "csv/lines": [
        "write `{out}` as CSV: the header `index,{head}`, then one row `N,VALUE` per line, N counting from 1",
        "save them to `{out}` as a CSV file with columns `index` (1, 2, ...) and `{head}`, header row first",
        "store them in `{out}` as CSV with header `index,{head}` and numbered rows",
        "put them in {out} as a table with the columns index and {head}, a header line first and the rows "
        "numbered from 1",
        "output them to `{out}` as CSV with the header `index,{head}` and rows `1,VALUE`, `2,VALUE`, and so on",
        "the result goes into `{out}` as a CSV table: first the line `index,{head}`, then one numbered row per "
        "line starting at 1",
        "`{out}` must end up a CSV file headed `index,{head}` with one row per line, numbered from 1",
    ],
    "csv/number": [
        "write `{out}` as CSV: the header `{head}` and one row holding the number",
        "save the number to `{out}` as a CSV file with the single column `{head}` (header first)",
        "store it in `{out}` as CSV with header `{head}`",
        "put it in {out} as a one-column table headed {head}",
        "output it to `{out}` as CSV: a `{head}` header line, then the number",
        "the number goes into `{out}` as a one-column CSV with the header `{head}`",
        "`{out}` must end up a CSV file with header `{head}` and the number as its only row",
    ],
    "append/lines": [
        "append the result to the end of `{out}`, one per line, keeping the lines already there",
        "add them at the end of `{out}` (leave its current lines in place)",
        "append them to `{out}`",
        "tack them onto the end of {out} without touching what it holds",
        "add them to the end of `{out}`, one per line, without removing what is already there",
        "the result goes after the existing content of `{out}`, one line each",
        "`{out}` must keep its current lines and gain these after them, one per line",
    ],
    "append/number": [
        "append the number to the end of `{out}` as a new line, keeping the lines already there",
        "add the number as the last line of `{out}` (leave its current lines in place)",
        "append it to `{out}`",
        "tack that figure onto the end of {out} without touching what it holds",
        "add the number as a new final line of `{out}`, keeping its current content",
        "the number goes after the existing lines of `{out}`, as a line of its own",
        "`{out}` must keep its current lines and gain the number as a last line",
    ],
}
FILE: dict[str, list[str]] = {
    "copy": [
        "Also keep an unchanged copy of `{src}` at `{dest}`.",
        "Keep a backup of `{src}` as `{dest}`.",
        "Copy `{src}` to `{dest}` as well.",
        "Leave a duplicate of {src} at {dest} too.",
        "Make an identical copy of `{src}` named `{dest}` as well.",
        "Duplicate `{src}` to `{dest}` too.",
        "`{dest}` must also hold an exact copy of `{src}`.",
    ],
    "move": [
        "Afterwards move `{src}` into the folder `{dest}` (create it).",
        "Then move `{src}` to `{dest}/`, creating the folder.",
        "Finally, move the input into `{dest}`.",
        "Once done, file {src} away in the directory {dest}, creating it if needed.",
        "Then put `{src}` inside a new folder `{dest}`.",
        "Move the input file into the directory `{dest}`, making it first.",
        "At the end `{src}` must sit in the folder `{dest}` (create it).",
    ],
    "rename": [
        "Afterwards rename `{src}` to `{dest}`.",
        "Then rename the input file to `{dest}`.",
        "Finally, rename `{src}` as `{dest}`.",
        "When finished, give {src} the new name {dest}.",
        "Then change the name of `{src}` to `{dest}`.",
        "Rename the input to `{dest}` at the end.",
        "At the end `{src}` must be called `{dest}`.",
    ],
}


def _frame(clauses: list[str], wording: int) -> str:
    first = clauses[0][0].upper() + clauses[0][1:]
    if wording == 0:
        body = ", ".join([first, *clauses[1:-1]])
        return f"{body}, and {clauses[-1]}."
    if wording == 1:
        return "; ".join([first, *clauses[1:]]) + "."
    if wording == 2:
        return "Do the following:\n" + "".join(f"{i}. {c[0].upper() + c[1:]}.\n" for i, c in enumerate(clauses, 1))
    middle = "".join(f", then {c}" for c in clauses[1:-1])
    return f"Here is what I need: first {clauses[0]}{middle}, and finally {clauses[-1]}."


def values(plan) -> dict:
    """The placeholders' values of a plan (paths absolute, inside the sandbox)."""
    from trajkit.envs.harbor.families.compose_data import dest

    p, file = plan.params, plan.kind.file
    where = None if file not in FILE else f"/app/{p['dest']}" if file == "move" else dest(plan)
    return {"src": f"/app/{plan.src}", "out": f"/app/{plan.out}", "needle": p.get("needle"), "n": p.get("n"),
            "col": p.get("column"), "old": p.get("old"), "new": p.get("new"), "key": p.get("key"),
            "head": p.get("head"), "dest": where}


def instruction(plan, wording: int, rng: random.Random | None = None, phrasings: int = DEFAULT_PHRASINGS) -> str:
    """The instruction of ``plan`` in frame ``wording``; without ``rng`` every clause in phrasing ``wording``
    (the held-out instruction), with it each clause in one of the first ``phrasings`` train phrasings
    (:data:`TRAIN_PHRASINGS`) drawn from ``rng``, and one quoting (module docstring). ``rng`` is drawn from only
    here, after the plan: the task's data stay as they were, whatever ``phrasings`` is."""
    k, v = plan.kind, values(plan)
    steps = [s for s in (k.select, k.map, *k.order, k.aggregate) if s]
    sink = "append" if k.file == "append" else k.format
    phrases = [STEP[s] for s in steps] + [WRITE[f"{sink}/{'number' if k.aggregate else 'lines'}"]]
    if k.file in FILE:
        phrases.append(FILE[k.file])
    if rng is None:
        chosen, quote = [p[wording] for p in phrases], "`"
    else:
        assert wording < WORDING_COUNT - 1, "a train instruction is never in the held-out frame"
        pool = TRAIN_PHRASINGS[:check_phrasings(phrasings)]
        chosen = [p[pool[rng.randrange(len(pool))]] for p in phrases]
        quote = rng.choice(QUOTES)
    clauses = [c.replace("`", quote).format(**v) for c in chosen]
    note = clauses.pop() if k.file in FILE else None
    text = _frame(clauses, wording)
    if note is not None:
        text += ("\n" if wording == 2 else " ") + note
    return text


def check_phrasings(phrasings: int) -> int:
    """``phrasings`` if it is a count of train phrasings (1 to 6), else the ConfigError that says so."""
    if isinstance(phrasings, bool) or not isinstance(phrasings, int) or not 1 <= phrasings <= len(TRAIN_PHRASINGS):
        raise ConfigError(f"phrasings: the composed kinds' train instructions draw from 1 to "
                          f"{len(TRAIN_PHRASINGS)} phrasings a clause, got {phrasings!r}")
    return phrasings
