"""The README's trajkit commands run, as written, on the bundled sample (copied under the README's names)."""
import re
import shlex
from pathlib import Path


from trajkit.cli.main import main
from trajkit.synth import sample_paths

README = Path(__file__).resolve().parents[1] / "README.md"


def _commands(section: str) -> list[str]:
    text = README.read_text()
    body = text[text.index(f"## {section}"):]
    block = re.search(r"```bash\n(.*?)```", body, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.startswith("trajkit ")]


def test_readme_quickstart_is_two_make_commands():
    text = README.read_text()
    quick = re.search(r"## Quickstart.*?```bash\n(.*?)```", text, re.S).group(1)
    assert [line.split("#")[0].strip() for line in quick.strip().splitlines()] == ["make demo", "make test"]


def test_readme_traces_commands_run(tmp_path, monkeypatch, capsys):
    import lzma

    for src in sample_paths():  # kimi.jsonl.xz -> kimi.jsonl, glm-5.1.jsonl.xz -> glm-5.1.jsonl
        (tmp_path / src.name.removesuffix(".xz")).write_bytes(lzma.decompress(src.read_bytes()))
    from trajkit.models.tokenizer import build_tokenizer

    build_tokenizer(tmp_path / "tok")
    monkeypatch.chdir(tmp_path)
    commands = _commands("Traces")
    assert len(commands) == 9
    for command in commands:
        argv = shlex.split(command)[1:]
        if argv[:2] == ["traces", "synth"]:
            argv[argv.index("--rows") + 1] = "20"  # keep the test fast; same code path
        assert main(argv + (["-q"] if argv[1] in ("stats", "report", "filter", "export") else [])) == 0, command
    assert (tmp_path / "report" / "report.html").exists()
    assert (tmp_path / "sft.parquet").stat().st_size > 0
    assert "glm-5.1" in capsys.readouterr().out


def test_readme_train_commands_run(tmp_path, monkeypatch):
    """The RL commands, shortened to 2 steps without evaluation, from the repository root."""
    monkeypatch.chdir(README.parent)
    commands = _commands("RL training")
    assert len(commands) == 2
    for command in commands:
        argv = [a if not a.startswith("log.out_dir=") else f"log.out_dir={tmp_path / 'run'}"
                for a in shlex.split(command)[1:]]
        assert main(argv + ["steps=2", "eval.every=0", "--no-progress"]) == 0, command
