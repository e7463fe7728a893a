"""Names from traces cannot restyle a terminal or reorder the report's ids and titles."""
import json

from trajkit.cli.main import main
from trajkit.traces.safe_text import mark_bidi, printable

ANSI = "\x1b[31mred\x1b[0m"
OSC = "\x1b]0;owned\x07"


def _rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_printable_escapes_controls_and_bidi():
    assert printable(ANSI) == "\\x1b[31mred\\x1b[0m"
    assert printable("a\u202eb\rc\x9bd") == "a\\u202eb\\x0dc\\x9bd"
    assert printable("Files é 日本") == "Files é 日本"


def test_terminal_table_shows_escaped_categories(tmp_path, capsys):
    rows = [{"id": str(i), "category": cat, "conversations": [{"from": "human", "value": "hi"}]}
            for i, cat in enumerate([ANSI, OSC, "plain"])]
    path = _rows(tmp_path / "c.jsonl", rows)
    assert main(["traces", "stats", str(path), "--by", "category", "-q"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert printable(ANSI) in out and printable(OSC) in out and "plain" in out


def test_report_marks_bidi_controls_in_ids_and_titles(tmp_path):
    row = {"id": "abc\u202efed", "task": "check \u2066this\u2069", "category": "x\u202ey",
           "conversations": [{"from": "human", "value": "hi"}]}
    src = _rows(tmp_path / "evil\u202etxt.jsonl", [row])
    assert main(["traces", "report", str(src), "--out", str(tmp_path / "rep"), "-q"]) == 0
    page = (tmp_path / "rep" / "report.html").read_text()
    assert '<code class="t-id">abc[U+202E]fed</code>' in page
    assert 'title="check [U+2066]this[U+2069]"' in page
    head = page[:page.index("<body")] if "<body" in page else page
    assert "\u202e" not in head and "evil[U+202E]txt" in page  # page title from the file name
    assert mark_bidi("plain") == "plain"
