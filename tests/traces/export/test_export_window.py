"""``traces export --format tokens --max-length N`` against the model's window when the tokenizer folder is a
model folder: past ``max_position_embeddings`` it is a one-line error saying what to set, ``--rope-type yarn
--rope-factor F`` (the window the examples will be trained at) extends it; a tokenizer alone is not checked."""
import json
import lzma

import pytest

from trajkit.cli.main import main
from trajkit.synth import sample_paths


@pytest.fixture
def src(tmp_path):
    with lzma.open(sample_paths()[0], "rt") as fh:
        rows = [next(fh) for _ in range(2)]
    path = tmp_path / "two.jsonl"
    path.write_text("".join(rows))
    return path


def _export(src, folder, tmp_path, *extra):
    return main(["traces", "export", str(src), "--format", "tokens", "--tokenizer", folder, "--out",
                 str(tmp_path / "out.jsonl"), "-q", *extra])


def test_max_length_past_the_window_says_what_to_set(src, tmp_path, capsys, smollm2_folder):
    assert _export(src, smollm2_folder, tmp_path, "--max-length", "20000") == 2
    err = capsys.readouterr().err
    assert err == (f"trajkit: error: --max-length 20000 is past the model's 8192 positions ({smollm2_folder}/"
                   "config.json); lower --max-length to 8192, or extend the window with YaRN: --rope-type yarn "
                   "--rope-factor 3 here, and policy.rope_scaling.type=yarn policy.rope_scaling.factor=3 in "
                   "training\n")
    assert _export(src, smollm2_folder, tmp_path, "--max-length", "20000", "--rope-type", "yarn",
                   "--rope-factor", "2") == 2
    assert "past the model's 16384 positions" in capsys.readouterr().err and not (tmp_path / "out.jsonl").exists()


def test_a_yarn_window_admits_the_length(src, tmp_path, capsys, smollm2_folder, smollm2_tokenizer_folder):
    assert _export(src, smollm2_folder, tmp_path, "--max-length", "20000", "--rope-type", "yarn",
                   "--rope-factor", "4") == 0
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 2
    assert _export(src, smollm2_folder, tmp_path, "--max-length", "8192") == 0
    assert _export(src, smollm2_tokenizer_folder, tmp_path, "--max-length", "20000") == 0  # no model config


def test_folder_window_reads_a_saved_yarn_config(tmp_path):
    from trajkit.models.rope import RopeScaling, folder_window

    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 16384, "rope_parameters": {
        "rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8192, "rope_theta": 1e5,
        "beta_fast": 32.0, "beta_slow": 1.0}}))
    assert folder_window(tmp_path) == 16384
    assert folder_window(tmp_path, RopeScaling(type="yarn", factor=2.0)) == 16384  # the same scaling: as saved
    assert folder_window(tmp_path / "none") is None
