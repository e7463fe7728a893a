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


def test_readme_train_commands_run(tmp_path, monkeypatch, capsys, smollm2_folder):
    """The RL commands, from the repository root: training shortened to 2 steps without evaluation (the
    SmolLM2 ones to 1 step of 1 prompt x 2 completions of 6 tokens), W&B offline."""
    monkeypatch.chdir(README.parent)
    monkeypatch.setenv("WANDB_MODE", "offline")
    commands = _commands("RL training")
    assert len(commands) == 5
    for command in commands:
        argv = [a if not a.startswith("log.out_dir=") else f"log.out_dir={tmp_path / 'run'}"
                for a in shlex.split(command)[1:]]
        capsys.readouterr()
        if argv[:2] == ["models", "prepare"]:
            assert main(argv) == 0 and capsys.readouterr().out.strip() == smollm2_folder
            continue
        if "--print-config" in argv:
            assert main(argv) == 0 and "policy:" in capsys.readouterr().out
            continue
        small = ["rollout.prompts_per_step=1", "rollout.group_size=2", "rollout.max_new_tokens=6", "threads=2",
                 "steps=1", "rollout.max_refill_rounds=1"] if argv[1] == "grpo_smollm2" else ["steps=2"]
        argv += small + ["eval.every=0", f"log.out_dir={tmp_path / 'run'}", "--no-progress"]
        assert main(argv) == 0, command
