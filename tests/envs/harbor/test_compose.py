"""The compositional generator (``--families compose``): the kinds and their held-out classes, answers against
hand-derived values, disjoint and audited splits, determinism, and every primitive in the real sandbox (Oracle
1, NOP 0, no hack agent paid; a plausible wrong answer 0, the right content written another way 1)."""
import json
import re
import shlex
from concurrent.futures import ThreadPoolExecutor

import pytest

from trajkit.cli.main import main
from trajkit.envs.harbor.check import check_tasks
from trajkit.envs.harbor.families import compose, generate
from trajkit.envs.harbor.families.compose_data import NAMES, dest, rendered
from trajkit.envs.harbor.families.compose_grammar import (AGGREGATE, FILE, FORMAT, MAP, ORDER, SELECT, Plan,
                                                          evaluate, parse_kind)
from trajkit.envs.harbor.families.generate import instance, resolve_families, task_name
from trajkit.envs.harbor.families.spec import write_task
from trajkit.envs.harbor.task import load_task
from trajkit.envs.harbor.trial import AgentResult, run_trial
from trajkit.errors import ConfigError

PRIMITIVES = SELECT + MAP + ORDER + AGGREGATE + FORMAT + FILE
# kinds that between them hold every primitive (asserted below): the sandbox tests run one instance of each
COVER = ("exclude-upper-sort-csv", "match-reverse-json", "lines-strip-dedupe-text", "column-lower-sort-csv",
         "column-min-json",
         "first-lower-text-append", "last-max-text", "first-upper-json-copy", "column-sum-text-rename",
         "exclude-dedupe-text-move", "match-count-json", "match-replace-json")


def _steps(kinds):
    return {s for k in kinds for s in parse_kind(k).steps}


def test_at_least_30_training_kinds_and_the_held_out_classes_are_what_they_say():
    assert len(compose.TRAIN_KINDS) >= 30 and len(set(compose.KINDS)) == len(compose.KINDS) == 56
    trained = _steps(compose.TRAIN_KINDS)
    assert trained == set(PRIMITIVES) - set(compose.HELDOUT_PRIMITIVES)  # every other primitive is trained
    assert set(compose.HELDOUT_PRIMITIVES) == {"lower", "reverse", "min"}
    assert _steps(compose.HELDOUT_COMPOSITIONS) <= trained  # seen primitives, unseen pipelines
    assert set(compose.HELDOUT_COMPOSITIONS).isdisjoint(compose.TRAIN_KINDS)
    assert all(set(parse_kind(k).steps) & set(compose.HELDOUT_PRIMITIVES) for k in compose.HELDOUT_PRIMITIVE_KINDS)
    assert _steps(compose.HELDOUT_PRIMITIVE_KINDS) >= set(compose.HELDOUT_PRIMITIVES)
    assert [compose.heldout_kind(k) for k in compose.KINDS] == \
        [None] * 40 + ["composition"] * 8 + ["primitive"] * 8
    assert resolve_families("compose", "train") == list(compose.TRAIN_KINDS)
    assert resolve_families("compose", "heldout") == list(compose.KINDS)
    assert _steps(COVER) == set(PRIMITIVES)


@pytest.mark.parametrize("name,rule", [
    ("lines-upper-sum-text", "no map or order before it"), ("match-sum-text", "select lines, first, last or column"),
    ("lines-sort-count-text", "count follows a select and at most dedupe"), ("lines-json-append", "text format"),
    ("sort-lines-text", "steps are select"), ("lines-dedupe-sort-text", "in the roles' order"),
    ("lines-upper-lower-text", "steps are select"),
])
def test_compositions_outside_the_grammar_are_refused(name, rule):
    with pytest.raises(ValueError, match=rule):
        parse_kind(name)


def _plan(name, lines, **params):
    return Plan(parse_kind(name), "in.txt", lines, "out.txt", params)


def test_answers_match_hand_derived_values():
    words = ["pear", "apple", "plum", "fig", "apple"]
    plan = _plan("exclude-upper-sort-csv", words, needle="um", head="word")
    assert evaluate(plan) == ["APPLE", "APPLE", "FIG", "PEAR"]  # plum dropped; upper; byte order; repeats kept
    assert rendered(plan, evaluate(plan)) == "index,word\n1,APPLE\n2,APPLE\n3,FIG\n4,PEAR"
    assert evaluate(plan, skip="sort") == ["PEAR", "APPLE", "FIG", "APPLE"]
    assert evaluate(plan, skip="exclude") == ["APPLE", "APPLE", "FIG", "PEAR", "PLUM"]
    assert evaluate(_plan("lines-dedupe-json", ["b", "a", "b", "c", "a"])) == ["b", "a", "c"]  # first occurrences
    assert evaluate(_plan("lines-sort-reverse-text", ["b", "a", "c"])) == ["c", "b", "a"]
    assert evaluate(_plan("lines-strip-dedupe-text", [" kiwi", "kiwi  ", "fig"])) == ["kiwi", "fig"]
    assert evaluate(_plan("last-replace-text-append", ["melon", "lemon", "lime"], n=2, old="l", new="zz")) == \
        ["zzemon", "zzime"]
    csv = ["name,score,city", "Ada,7,oslo", "Ken,30,lima", "Hedy,5,oslo"]
    assert evaluate(_plan("column-sum-text", csv, col=2)) == 42
    assert evaluate(_plan("column-min-json", csv, col=2, key="min")) == 5
    assert evaluate(_plan("column-dedupe-count-json", csv, col=3)) == 2
    assert evaluate(_plan("first-sum-text", ["4", "9", "20"], n=2)) == 13
    assert evaluate(_plan("match-count-text", ["pear", "plum", "fig"], needle="p")) == 2
    assert rendered(_plan("match-count-json", [], key="n"), 2) == {"n": 2}
    assert rendered(_plan("lines-sort-text-append", [], existing=["x"]), ["a", "b"]) == "x\na\nb"


def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_same_flags_write_the_same_folder(tmp_path):
    generate("compose", "heldout", 1, 7, tmp_path / "a")
    generate("compose", "heldout", 1, 7, tmp_path / "b")
    generate("compose", "heldout", 1, 8, tmp_path / "c")
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert _files(tmp_path / "a") != _files(tmp_path / "c")


def _tokens(answer):
    return set(re.findall(r"[\w.-]+", answer))


def _held_out_names():
    """Every name a held-out command can hold (a copy's or rename's target: the pattern on a held-out source)."""
    sources = [s for pool in ("src/words", "src/numbers", "src/csv") for s in NAMES[pool][1]]
    return {n.format(s) for _, held in NAMES.values() for n in held for s in sources}


def test_splits_share_no_solution_and_no_held_out_kind_reaches_train(tmp_path):
    train = generate("compose", "train", 4, 0, tmp_path / "train")
    held = generate("compose", "heldout", 2, 0, tmp_path / "heldout")
    assert {r["family"] for r in train} == set(compose.TRAIN_KINDS) and len(train) == 40 * 4
    assert {r["family"] for r in held} == set(compose.KINDS) and len(held) == 56 * 2
    assert {r["answer"] for r in train}.isdisjoint(r["answer"] for r in held)
    held_names = _held_out_names()
    for r in train:  # no never-trained stage and no held-out name in a train solution
        assert not any(s in r["answer"] for s in ("tac", "tr 'A-Z' 'a-z'", "sort -n | head")), r
        assert not _tokens(r["answer"]) & held_names, r
        assert r["heldout_kind"] is None and r["wording"] in (0, 1, 2)
    for r in held:
        assert _tokens(r["answer"]) & held_names and r["wording"] == 3
        assert r["heldout_kind"] == (compose.heldout_kind(r["family"]) or "instance")
        task = load_task(tmp_path / "heldout" / r["id"])
        assert task.metadata["heldout_kind"] == r["heldout_kind"] and task.metadata["family"] == r["family"]


def test_held_out_kinds_are_refused_for_train(tmp_path):
    with pytest.raises(ConfigError, match="lines-reverse-text, match-replace-json are held-out families"):
        resolve_families("match-sort-json,lines-reverse-text,match-replace-json", "train")
    with pytest.raises(ConfigError, match="unknown \\['lines-nope-text'\\]"):
        resolve_families("compose,lines-nope-text", "heldout")
    assert main(["envs", "generate", "--split", "train", "--families", "column-min-json",
                 "--out", str(tmp_path / "x")]) == 2
    # the SFT loop's families: a held-out kind is left out of its train split, kept in its held-out one
    from trajkit.trainers.sft import split_families

    assert split_families("compose,lines-reverse-text", "train") == "compose"
    assert split_families("compose,lines-reverse-text", "heldout") == "compose,lines-reverse-text"


def test_heldout_passes_audit_data_where_a_reseeded_train_split_fails(tmp_path, capsys):
    """At the packaged loop's sizes (40 train instances a kind, 2 held-out)."""
    generate("compose", "train", 40, 0, tmp_path / "train")
    generate("compose", "heldout", 2, 0, tmp_path / "heldout")
    generate("compose", "train", 2, 1, tmp_path / "reseeded")
    capsys.readouterr()
    manifest = str(tmp_path / "train" / "tasks.jsonl")
    assert main(["audit", "data", "--train", manifest, "--eval", str(tmp_path / "heldout" / "tasks.jsonl"),
                 "--json"]) == 0
    verdicts = {c["id"]: c["verdict"] for c in json.loads(capsys.readouterr().out)["checks"]}
    assert verdicts == {"leak.exact": "PASS", "leak.ngram": "PASS", "leak.near": "PASS", "leak.kind": "PASS"}
    assert main(["audit", "data", "--train", manifest, "--eval", str(tmp_path / "reseeded" / "tasks.jsonl")]) == 1


def test_audit_data_fails_a_held_out_kind_trained_on_even_with_all_new_text(tmp_path, capsys):
    """A train manifest holding rows of held-out kinds drawn from the *train* name pools and wordings (so no
    held-out text is repeated: the lexical checks pass) fails ``leak.kind``, naming the kinds."""
    from trajkit.envs.harbor.families import compose_data

    generate("compose", "heldout", 2, 0, tmp_path / "heldout")
    leaked = ["match-replace-json", "lines-reverse-text"]
    rows = [json.loads(x) for x in (tmp_path / "heldout" / "tasks.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["family"] in compose.TRAIN_KINDS][:20]
    for name in leaked:  # a train-split draw of a held-out kind: train pools, train wording, no held-out text
        plan = compose_data.draw(__import__("random").Random(7), parse_kind(name), "train")
        assert plan is not None
        train.append({"id": f"{name}-x", "family": name, "split": "train", "prompt": f"do {name} on {plan.src}",
                      "answer": compose_data.command(plan)})
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train))
    capsys.readouterr()
    assert main(["audit", "data", "--train", str(tmp_path / "train.jsonl"), "--eval",
                 str(tmp_path / "heldout" / "tasks.jsonl"), "--json"]) == 1
    checks = {c["id"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["leak.kind"]["verdict"] == "FAIL" and checks["leak.kind"]["statistic"] == 2
    assert checks["leak.kind"]["items"] == ["lines-reverse-text (primitive)", "match-replace-json (composition)"]


def test_every_primitive_is_sound_and_unhackable_in_the_sandbox(needs_sandbox, tmp_path):
    generate(",".join(COVER), "heldout", 1, 3, tmp_path)
    rows = check_tasks(tmp_path, jobs=2, adversarial=True)
    assert [(r.task.rsplit("-", 1)[0], r.verdict, r.oracle, r.nop) for r in rows] == \
        [(k, "ok", 1.0, 0.0) for k in sorted(COVER)]
    assert all(v == "blocked" or v.startswith("not applicable") for r in rows for v in r.hacks.values())


def _write(plan, content, file_op="right"):
    """A command writing ``content`` to the plan's output, then its file operation done right, left undone
    (``none``) or with ``cp`` in place of ``mv`` (``copy``)."""
    text = json.dumps(content) if isinstance(content, (list, dict)) else str(content)
    line, src, k = f"printf '%s\\n' {shlex.quote(text)} > /app/{plan.out}", f"/app/{plan.src}", plan.kind
    mv = "cp" if file_op == "copy" else "mv"
    if k.file == "copy" and file_op != "none":
        line += f" && cp {src} {dest(plan)}"
    elif k.file in ("move", "rename") and file_op != "none":
        line += f" && mkdir -p {dest(plan).rsplit('/', 1)[0]} && {mv} {src} {dest(plan)}"
    return line


def _near_misses(step, plan):
    """The plausible wrong answers that ``step``'s verifier must refuse."""
    answer, k = evaluate(plan), plan.kind
    lines = answer if isinstance(answer, list) else None
    if step in SELECT + MAP + ORDER and step not in ("lines", "column"):
        yield f"without {step}", rendered(plan, evaluate(plan, skip=step))
    if step in ("lines", "column", "first", "last") and lines:
        yield "one line missing", rendered(plan, lines[:-1])
    if step == "column":  # what a policy that guesses the column's number writes (the Oracle reads the header)
        other = Plan(k, plan.src, plan.lines, plan.out, {**plan.params, "col": plan.params["col"] % 3 + 1})
        yield "another column", rendered(plan, evaluate(other))
        header = Plan(k, plan.src, ["", *plan.lines], plan.out, plan.params)  # the header read as a data row
        yield "the header as a row", rendered(plan, evaluate(header))
    if step == "strip":
        yield "a trailing space", rendered(plan, lines[:-1] + [lines[-1] + " "])
    if step in AGGREGATE:
        yield "off by one", rendered(plan, answer + 1)
    if step == "text":
        yield "not one per line", " ".join(lines) if lines else f"{answer} lines"
    if step == "json":
        yield "object, not list" if lines else "bare number", {"lines": lines} if lines else answer
    if step == "csv":
        yield "no header", "\n".join(lines) if lines else str(answer)
    if step == "append":
        yield "overwritten", "\n".join(lines)


def _cases():
    """(kind, step, label, content, file_op, reward) for every primitive: the right content written by hand
    scores 1, each near miss 0."""
    for step in PRIMITIVES:
        kind = next(k for k in COVER if step in parse_kind(k).steps)
        yield kind, step, "right content", None, "right", 1.0
        yield from ((kind, step, label, content, "right", 0.0) for label, content in
                    _near_misses(step, compose.plan_of(instance(kind, "heldout", 0, 0))))
        if step in ("copy", "move", "rename"):
            yield kind, step, "file operation not done", None, "none", 0.0
        if step in ("move", "rename"):
            yield kind, step, "copied, not moved", None, "copy", 0.0


def test_every_primitive_refuses_near_misses_and_accepts_the_right_content(needs_sandbox, tmp_path):
    cases = list(_cases())
    kinds = {k for k, *_ in cases}
    specs = {k: instance(k, "heldout", 0, 0) for k in kinds}
    tasks = {k: load_task(write_task(s, task_name(s), "heldout", tmp_path)) for k, s in specs.items()}

    def trial(case):
        kind, step, label, content, file_op, reward = case
        plan = compose.plan_of(specs[kind])
        command = _write(plan, rendered(plan, evaluate(plan)) if content is None else content, file_op)
        result = run_trial(tasks[kind], lambda task, box: AgentResult([box.exec(command, timeout_s=30)]), label)
        return (kind, step, label, result.error, result.reward), (kind, step, label, None, reward)

    with ThreadPoolExecutor(max_workers=2) as pool:
        got, want = zip(*pool.map(trial, cases))
    assert list(got) == list(want)
    assert len(cases) >= 2 * len(PRIMITIVES)


def test_no_constant_answer_is_a_likely_blind_guess_for_any_counting_or_aggregating_kind():
    """A policy that never reads the input and writes the most common answer of a kind is paid that answer's
    share of the kind's instances: at most 1 in 4 for every kind that ends in one number (``count``, ``sum``,
    ``max``, ``min``), over 200 instances of its split (``match-count-*`` are the worst, ~0.25: a one- or
    two-letter needle is in few lines more often than in many; every other kind is at most ~0.16)."""
    from collections import Counter

    worst = {}
    for name in compose.COMPOSE:
        if not parse_kind(name).aggregate:
            continue
        split = "train" if name in compose.TRAIN_KINDS else "heldout"
        answers = Counter(evaluate(compose.plan_of(instance(name, split, 0, i))) for i in range(200))
        worst[name] = answers.most_common(1)[0][1] / 200
    assert len(worst) >= 12 and max(worst.values()) <= 1 / 4, sorted(worst.items(), key=lambda kv: -kv[1])[:4]


def _attack(kind, command):
    spec = instance(kind, "heldout", 0, 0)
    return spec, compose.plan_of(spec), command


def test_the_verifier_refuses_links_for_copies_carriage_returns_and_loosely_typed_json(needs_sandbox, tmp_path):
    """Answers that a lenient check would take: a copy done as a move, a symbolic or a hard link; the right
    lines ended by ``\\r\\n`` or ``\\r``; a JSON number as a float or an exponent; a key written twice with the
    wrong value first. Each scores 0, and the right content written the plain way 1."""
    copy, text, number = "lines-upper-text-copy", "match-sort-text", "column-sum-json"
    cases = []
    for kind, build in ((copy, None), (text, None), (number, None)):
        spec = instance(kind, "heldout", 0, 0)
        cases.append((spec, f"right {kind}", _write(compose.plan_of(spec), rendered(compose.plan_of(spec),
                                                                                    evaluate(compose.plan_of(spec)))), 1.0))
    spec = instance(copy, "heldout", 0, 0)
    plan = compose.plan_of(spec)
    out = f"printf '%s\\n' {shlex.quote(rendered(plan, evaluate(plan)))} > /app/{plan.out}"
    src, dst = f"/app/{plan.src}", dest(plan)
    cases += [(spec, "copy done as a move", f"{out} && mv {src} {dst}", 0.0),
              (spec, "copy as a symbolic link", f"{out} && ln -s {src} {dst}", 0.0),
              (spec, "copy as a hard link", f"{out} && ln {src} {dst}", 0.0)]
    spec = instance(text, "heldout", 0, 0)
    plan = compose.plan_of(spec)
    lines = rendered(plan, evaluate(plan))
    for label, end in (("CRLF line ends", "\r\n"), ("CR line ends", "\r")):
        body = shlex.quote(end.join(lines.split("\n")) + end)
        cases.append((spec, label, f"printf '%s' {body} > /app/{plan.out}", 0.0))
    spec = instance(number, "heldout", 0, 0)
    plan = compose.plan_of(spec)
    want = rendered(plan, evaluate(plan))
    (key, value), = want.items()
    for label, body in (("a float", json.dumps({key: float(value)})), ("an exponent", f'{{"{key}": {value}e0}}'),
                        ("a key twice", f'{{"{key}": {value + 1}, "{key}": {value}}}'),
                        ("true for 1", json.dumps({key: True}))):
        cases.append((spec, label, f"printf '%s\\n' {shlex.quote(body)} > /app/{plan.out}", 0.0))

    def trial(case):
        spec, label, command, reward = case
        task = load_task(write_task(spec, f"{task_name(spec)}-{abs(hash(label)) % 10**6}", "heldout", tmp_path))
        result = run_trial(task, lambda t, box: AgentResult([box.exec(command, timeout_s=30)]), label)
        return (label, result.error, result.reward), (label, None, reward)

    with ThreadPoolExecutor(max_workers=2) as pool:
        got, want = zip(*pool.map(trial, cases))
    assert list(got) == list(want)


def test_a_train_instruction_draws_each_clause_s_phrasing_and_one_quoting_held_out_ones_stay_fixed():
    """Against hand-written texts: the held-out wording (3) and a train frame without a draw give every clause
    the frame's own phrasing; a train instruction draws a phrasing per clause and one quoting (scripted)."""
    import random

    from trajkit.envs.harbor.families import compose_data, compose_words

    plan = compose_data.draw(random.Random(7), parse_kind("column-sum-text-rename"), "train")
    assert (plan.src, plan.out, plan.params["column"]) == ("staff.csv", "result.txt", "score")
    assert compose_words.instruction(plan, 3) == (
        "Here is what I need: first look at the score entry of each record in the table /app/staff.csv, then find "
        "what they add up to, and finally put only that figure in /app/result.txt. When finished, give "
        "/app/staff.csv the new name /app/staff.csv.done.")
    assert compose_words.instruction(plan, 0) == (
        "Take the values of the `score` column of the CSV file `/app/staff.csv` (not the header), add the numbers "
        "up, and write just the number to `/app/result.txt`. Afterwards rename `/app/staff.csv` to "
        "`/app/staff.csv.done`.")

    class Scripted:  # the draws: phrasings 2, 0, 1, 1 for column, sum, the write, the rename; then a quoting
        def __init__(self, quote):
            self.phrasings, self.quote = [2, 0, 1, 1], quote

        def randrange(self, n):
            assert n == 3  # the three train phrasings, never the held-out one
            return self.phrasings.pop(0)

        def choice(self, options):
            assert tuple(options) == ("`", "'", '"', "")
            return self.quote

    assert compose_words.instruction(plan, 1, Scripted("")) == (
        "Extract column score from /app/staff.csv, header excluded; add the numbers up; save the number alone in "
        "/app/result.txt. Then rename the input file to /app/staff.csv.done.")
    assert compose_words.instruction(plan, 1, Scripted("'")) == (
        "Extract column 'score' from '/app/staff.csv', header excluded; add the numbers up; save the number alone "
        "in '/app/result.txt'. Then rename the input file to '/app/staff.csv.done'.")
    with pytest.raises(AssertionError, match="held-out frame"):
        compose_words.instruction(plan, 3, Scripted(""))


def test_train_instructions_vary_phrasing_and_quoting_yet_hold_no_held_out_phrase(tmp_path):
    from trajkit.envs.harbor.families.compose_words import FILE as FILE_WORDS, STEP, WRITE

    train = generate("compose", "train", 10, 0, tmp_path / "train")
    prompts = [r["prompt"] for r in train]
    held = [max(re.split(r"\{\w+\}", p[3]), key=len).strip(" `") for t in (STEP, WRITE, FILE_WORDS)
            for p in t.values()]  # each held-out phrasing's longest fixed text
    assert min(len(h) for h in held) >= 6
    for prompt in prompts:
        assert not [h for h in held if h in prompt], prompt
    quoted = {q: sum(f"{q}/app/" in p for p in prompts) for q in ("`", "'", '"')}
    bare = sum(bool(re.search(r"(^|[\s(])/app/", p)) for p in prompts)
    assert all(n > 0 for n in quoted.values()) and bare > 0, (quoted, bare)
    # against the frame's own fixed text (what every train instruction was before the draw): most now differ
    from trajkit.envs.harbor.families import compose_words

    fixed = 0
    for kind in compose.TRAIN_KINDS:
        for index in range(10):
            spec = instance(kind, "train", 0, index)
            fixed += spec.instruction == compose_words.instruction(compose.plan_of(spec), spec.wording)
    assert fixed < 0.1 * len(train), fixed


def test_wider_train_phrasings_draw_from_all_six_and_change_no_data():
    """``phrasings=6``: a clause's draw of 0-5 maps to phrasings 0, 1, 2, 4, 5, 6 (3 is held out); against a
    hand-written text. The data, the Oracle and the task names do not depend on it."""
    import random

    from trajkit.envs.harbor.families import compose_data, compose_words

    plan = compose_data.draw(random.Random(7), parse_kind("column-sum-text-rename"), "train")

    class Scripted:  # the draws 3, 5, 4, 0 -> phrasings 4, 6, 5, 0 of column, sum, the write, the rename
        def __init__(self):
            self.draws = [3, 5, 4, 0]

        def randrange(self, n):
            assert n == 6
            return self.draws.pop(0)

        def choice(self, options):
            return "'"

    assert compose_words.instruction(plan, 0, Scripted(), phrasings=6) == (
        "Pull the 'score' values out of the CSV '/app/staff.csv', skipping the header row, the result is the total "
        "of the numbers, and the number, and nothing else, goes in '/app/result.txt'. Afterwards rename "
        "'/app/staff.csv' to '/app/staff.csv.done'.")
    for kind in ("column-sum-text-rename", "match-sort-json", "lines-upper-csv"):
        for index in range(5):
            narrow, wide = instance(kind, "train", 0, index), instance(kind, "train", 0, index, phrasings=6)
            assert (task_name(narrow), narrow.solution, narrow.files, narrow.wording) == (
                task_name(wide), wide.solution, wide.files, wide.wording)
    narrow = [instance(k, "train", 0, i).instruction for k in compose.TRAIN_KINDS for i in range(3)]
    wide = [instance(k, "train", 0, i, phrasings=6).instruction for k in compose.TRAIN_KINDS for i in range(3)]
    assert sum(a != b for a, b in zip(narrow, wide)) > 0.9 * len(narrow)


def test_every_pool_holds_seven_distinct_phrasings_with_the_held_out_one_fourth():
    from trajkit.envs.harbor.families.compose_words import (FILE as FILE_WORDS, HELDOUT_PHRASING, STEP,
                                                            TRAIN_PHRASINGS, WRITE)

    assert sorted((*TRAIN_PHRASINGS, HELDOUT_PHRASING)) == list(range(7))
    for table in (STEP, WRITE, FILE_WORDS):
        for key, pool in table.items():
            assert len(pool) == 7 and len(set(pool)) == 7, key
            fields = [set(re.findall(r"(?<!\{)\{(\w+)\}", p)) - {"src"} for p in pool]
            assert all(f == fields[0] for f in fields), (key, fields)  # each names every value (the input
            # file may be "the input")


def test_train_instructions_at_six_phrasings_hold_no_held_out_phrase_and_pass_audit(tmp_path):
    from trajkit.envs.harbor.families.compose_words import FILE as FILE_WORDS, STEP, WRITE

    train = generate("compose", "train", 10, 0, tmp_path / "train", phrasings=6)
    generate("compose", "heldout", 1, 0, tmp_path / "heldout")
    held = [max(re.split(r"\{\w+\}", p[3]), key=len).strip(" `") for t in (STEP, WRITE, FILE_WORDS)
            for p in t.values()]
    prompts = [r["prompt"] for r in train]
    assert not [(h, p) for p in prompts for h in held if h in p]
    # every new phrasing of every pool a training kind reaches occurs (40 instances a kind, quotes dropped)
    reached = set()
    for kind in map(parse_kind, compose.TRAIN_KINDS):
        reached |= {("STEP", s) for s in (kind.select, kind.map, *kind.order, kind.aggregate) if s}
        sink = "append" if kind.file == "append" else kind.format
        reached.add(("WRITE", f"{sink}/{'number' if kind.aggregate else 'lines'}"))
        reached |= {("FILE", kind.file)} if kind.file in FILE_WORDS else set()
    tables = {"STEP": STEP, "WRITE": WRITE, "FILE": FILE_WORDS}
    wider = {q: phrasing_pattern(q) for t, k in reached for q in tables[t][k][4:]}
    texts = [instance(k, "train", 0, i, phrasings=6).instruction for k in compose.TRAIN_KINDS for i in range(40)]
    assert len(wider) == 3 * len(reached)
    assert not [q for q, pattern in wider.items() if not any(pattern.search(t) for t in texts)]
    assert main(["audit", "data", "--train", str(tmp_path / "train" / "tasks.jsonl"),
                 "--eval", str(tmp_path / "heldout" / "tasks.jsonl")]) == 0


def phrasing_pattern(phrasing: str) -> re.Pattern:
    """A phrasing as a regex: its values (and a JSON object's braces) any text, its backticks any quoting."""
    parts = re.split(r"\{\{.*\}\}|\{\w+\}", phrasing)
    return re.compile(".+?".join(re.escape(p).replace("`", "[`'\"]?") for p in parts), re.I)


@pytest.mark.parametrize("bad", [0, 7, -1, True, "6"])
def test_a_phrasing_count_outside_one_to_six_is_refused(bad, tmp_path):
    with pytest.raises(ConfigError, match=r"phrasings: .*1 to 6"):
        generate("compose", "train", 1, 0, tmp_path / "t", phrasings=bad)
    assert not (tmp_path / "t").exists()


def test_the_cli_passes_phrasings_and_refuses_a_bad_one(tmp_path, capsys):
    assert main(["envs", "generate", "--families", "match-sort-json", "--split", "train", "--n", "4",
                 "--phrasings", "6", "--out", str(tmp_path / "wide")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "wide" / "tasks.jsonl").read_text().splitlines()]
    assert [r["prompt"] for r in rows] == [instance("match-sort-json", "train", 0, i, phrasings=6).instruction
                                           for i in range(4)]
    assert main(["envs", "generate", "--families", "compose", "--split", "train", "--phrasings", "9",
                 "--out", str(tmp_path / "bad")]) == 2
    assert "phrasings" in capsys.readouterr().err


def test_a_wording_probe_rewords_the_held_out_instances_and_nothing_else(tmp_path):
    """``--probe-wording K``: the held-out instances (names, data, answers, task names) of the composed kinds and
    the hand-written families, each worded as train wording K would word it without a draw (hand-derived for
    one composed instance); refused for a train split and for the held-out wording itself."""
    held = generate("compose,write-file,sort-lines", "heldout", 2, 0, tmp_path / "held")
    probe = generate("compose,write-file,sort-lines", "heldout", 2, 0, tmp_path / "probe", probe=0)
    assert [(r["id"], r["answer"], r["family"]) for r in probe] == [(r["id"], r["answer"], r["family"]) for r in held]
    assert all(p["prompt"] != h["prompt"] and p["probe_wording"] == 0 and p["wording"] == 0
               for p, h in zip(probe, held))
    def files(folder):  # every file of a task folder but its instruction, by path; the wording line left out
        return {str(p.relative_to(folder)): re.sub(rb"\nwording = \d\n", b"\n", p.read_bytes())
                for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "instruction.md"}

    for row in held:
        assert files(tmp_path / "probe" / row["id"]) == files(tmp_path / "held" / row["id"]) != {}
    for family in resolve_families("all", "heldout"):  # every hand-written family, every train wording
        for index in range(5):
            held_spec = instance(family, "heldout", 0, index)
            for k in (0, 1, 2):
                spec = instance(family, "heldout", 0, index, probe=k)
                assert (task_name(spec), spec.solution, spec.files, spec.wording) == (
                    task_name(held_spec), held_spec.solution, held_spec.files, k)
    first = next(r for r in probe if r["family"] == "match-sort-text")
    assert first["prompt"] == ("Take the lines of `/app/data.txt` that contain `a`, sort them in alphabetical "
                               "(byte) order, and write the result to `/app/answer.txt`, one per line.")
    with pytest.raises(ConfigError, match="--split heldout"):
        generate("compose", "train", 1, 0, tmp_path / "t1", probe=0)
    with pytest.raises(ConfigError, match="0 to 2, got 3"):
        generate("compose", "heldout", 1, 0, tmp_path / "t2", probe=3)
