"""The instructions of composed kinds (:mod:`.compose`): one phrase per step, joined by a frame.

Every primitive has four phrasings and there are four frames (a sentence, a list of clauses, numbered steps,
a request in prose). The last phrasing and frame (``3``) are the held-out wording, as for the hand-written
families: no train instruction holds any of its phrases. A held-out instruction uses phrasing ``3`` of every
step and frame ``3``. A train instruction of wording ``w`` uses frame ``w``, and each of its clauses a train
phrasing drawn on its own, with names quoted one way throughout (backticks, single or double quotes, or
bare, as the held-out phrasings give them): 3 phrasings a clause and 4 quotings instead of one fixed text a
frame, so that SFT learns to read the steps, not one template's wording and punctuation.
"""
from __future__ import annotations

import random

WORDING_COUNT = 4
QUOTES = ("`", "'", '"', "")  # how a train instruction marks its names and values

STEP: dict[str, list[str]] = {
    "lines": ["take every line of `{src}`", "start from all the lines of `{src}`", "read the lines of `{src}`",
              "go through everything in {src}"],
    "match": ["take the lines of `{src}` that contain `{needle}`", "keep only the lines of `{src}` containing "
              "`{needle}`", "select the lines in `{src}` with `{needle}` in them",
              "pick out whichever lines of {src} include the letters {needle}"],
    "exclude": ["take the lines of `{src}` that do not contain `{needle}`", "drop every line of `{src}` "
                "containing `{needle}` and keep the rest", "select the lines in `{src}` without `{needle}`",
                "set aside the lines of {src} that include {needle} and work with the others"],
    "column": ["take the values of the `{col}` column of the CSV file `{src}` (not the header)",
               "read the `{col}` field of every data row of `{src}`", "extract column `{col}` from `{src}`, "
               "header excluded", "look at the {col} entry of each record in the table {src}"],
    "first": ["take the first {n} lines of `{src}`", "keep only the top {n} lines of `{src}`",
              "select lines 1 to {n} of `{src}`", "consider just the opening {n} lines of {src}"],
    "last": ["take the last {n} lines of `{src}`", "keep only the final {n} lines of `{src}`",
             "select the bottom {n} lines of `{src}`", "consider just the closing {n} lines of {src}"],
    "upper": ["convert them to upper case", "make every letter a capital", "upper-case them",
              "turn all their letters into capitals"],
    "lower": ["convert them to lower case", "make every letter small", "lower-case them",
              "turn all their letters into small ones"],
    "replace": ["replace every `{old}` in them with `{new}`", "change each occurrence of `{old}` to `{new}`",
                "substitute `{new}` for `{old}` everywhere", "wherever the text {old} appears put {new} in its place"],
    "strip": ["remove the spaces at the start and end of each line", "trim leading and trailing spaces from "
              "every line", "strip the surrounding spaces from each line",
              "get rid of any blanks before or after the text on each line"],
    "sort": ["sort them in alphabetical (byte) order", "put them in ascending alphabetical order",
             "sort them A to Z", "arrange them alphabetically"],
    "dedupe": ["drop repeated lines, keeping the first occurrence of each", "remove duplicates (keep each line's "
               "first appearance, in order)", "keep only the first copy of any line that repeats",
               "make sure no line shows up twice by leaving only the earliest of each"],
    "reverse": ["reverse their order, last line first", "flip the order so the last line comes first",
                "put them in reverse order", "turn the sequence around so it runs from the end back to the start"],
    "count": ["count them", "work out how many there are", "count the lines", "find how many lines that leaves"],
    "sum": ["add the numbers up", "compute their sum", "total them", "find what they add up to"],
    "max": ["find the largest number", "take the maximum", "pick the biggest value", "find the highest of them"],
    "min": ["find the smallest number", "take the minimum", "pick the lowest value", "find the least of them"],
}
WRITE: dict[str, list[str]] = {  # (format, lines or number, written or appended)
    "text/lines": ["write the result to `{out}`, one per line", "save them to `{out}`, one line each",
                   "store the lines in `{out}`", "put the outcome in {out} with one entry per line"],
    "text/number": ["write just the number to `{out}`", "save the number alone in `{out}`",
                    "store the figure in `{out}`", "put only that figure in {out}"],
    "json/lines": ["write the result to `{out}` as a JSON list of strings", "save them to `{out}` as a JSON "
                   "array of strings, in order", "store them in `{out}` as a JSON list",
                   "put them in {out} as a JSON array whose items are the lines as strings"],
    "json/number": ["write `{out}` as the JSON object `{{\"{key}\": N}}` with the number as N",
                    "save `{{\"{key}\": N}}` to `{out}`, N being the number",
                    "store the number in `{out}` as JSON: an object with the single key `{key}`",
                    "put it in {out} as a JSON object whose only key is {key}"],
    "csv/lines": ["write `{out}` as CSV: the header `index,{head}`, then one row `N,VALUE` per line, N counting "
                  "from 1", "save them to `{out}` as a CSV file with columns `index` (1, 2, ...) and `{head}`, "
                  "header row first", "store them in `{out}` as CSV with header `index,{head}` and numbered rows",
                  "put them in {out} as a table with the columns index and {head}, a header line first and the "
                  "rows numbered from 1"],
    "csv/number": ["write `{out}` as CSV: the header `{head}` and one row holding the number",
                   "save the number to `{out}` as a CSV file with the single column `{head}` (header first)",
                   "store it in `{out}` as CSV with header `{head}`",
                   "put it in {out} as a one-column table headed {head}"],
    "append/lines": ["append the result to the end of `{out}`, one per line, keeping the lines already there",
                     "add them at the end of `{out}` (leave its current lines in place)",
                     "append them to `{out}`", "tack them onto the end of {out} without touching what it holds"],
    "append/number": ["append the number to the end of `{out}` as a new line, keeping the lines already there",
                      "add the number as the last line of `{out}` (leave its current lines in place)",
                      "append it to `{out}`", "tack that figure onto the end of {out} without touching what it holds"],
}
FILE: dict[str, list[str]] = {
    "copy": ["Also keep an unchanged copy of `{src}` at `{dest}`.", "Keep a backup of `{src}` as `{dest}`.",
             "Copy `{src}` to `{dest}` as well.", "Leave a duplicate of {src} at {dest} too."],
    "move": ["Afterwards move `{src}` into the folder `{dest}` (create it).",
             "Then move `{src}` to `{dest}/`, creating the folder.", "Finally, move the input into `{dest}`.",
             "Once done, file {src} away in the directory {dest}, creating it if needed."],
    "rename": ["Afterwards rename `{src}` to `{dest}`.", "Then rename the input file to `{dest}`.",
               "Finally, rename `{src}` as `{dest}`.", "When finished, give {src} the new name {dest}."],
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


def instruction(plan, wording: int, rng: random.Random | None = None) -> str:
    """The instruction of ``plan`` in frame ``wording``; without ``rng`` every clause in phrasing ``wording``
    (the held-out instruction), with it each clause in a train phrasing drawn from ``rng`` and one quoting
    (module docstring). ``rng`` is drawn from only here, after the plan: the task's data stays as it was."""
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
        chosen = [p[rng.randrange(WORDING_COUNT - 1)] for p in phrases]
        quote = rng.choice(QUOTES)
    clauses = [c.replace("`", quote).format(**v) for c in chosen]
    note = clauses.pop() if k.file in FILE else None
    text = _frame(clauses, wording)
    if note is not None:
        text += ("\n" if wording == 2 else " ") + note
    return text
