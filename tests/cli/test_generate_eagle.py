"""``trajkit generate`` with an EAGLE head (``--drafter eagle``, ``--draft HEAD``): greedy output equals plain
greedy decoding of the target token for token, the stats show the head's drafts; the prepared SmolLM2
head is the default only when cached; a head trained on another target is refused by name."""
from __future__ import annotations

import json

import pytest
import torch

from tests.engine.helpers import trained_eagle
from trajkit.cli.main import main
from trajkit.engine import Engine, SamplingParams
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer, save_tokenizer
from trajkit.recipes.smollm2 import NAME
from trajkit.recipes.smollm2_eagle import eagle_folder

BYTES = byte_tokenizer()
SPEC = TinySpec(vocab_size=264, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=64)
PROMPTS = [[1, 2, 3], [40, 41, 42, 43, 44]]
NEW = 24


def _save(spec: TinySpec, folder):
    model = build_model(spec, 0, init_scale=10.0)
    model.save_pretrained(folder)
    save_tokenizer(BYTES, folder)
    return model


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A tiny target saved where the prepared SmolLM2 model would be (cache root ``cache``), and an EAGLE
    head trained on its samples (``head``)."""
    root = tmp_path_factory.mktemp("eagle-cli")
    target = _save(SPEC, root / "cache" / NAME / "model")
    trained_eagle(target, layers=(1, 2), steps=60, seed=0).save(root / "head")
    return root


def _generate(capsys, *argv):
    args = ["generate", *argv, "--max-new-tokens", str(NEW), "--temperature", "0", "--json"]
    for p in PROMPTS:
        args += ["--prompt-ids", ",".join(map(str, p))]
    rc = main(args)
    captured = capsys.readouterr()
    if rc != 0:
        return rc, captured.err
    lines = [json.loads(line) for line in captured.out.splitlines()]
    return rc, ([r["token_ids"] for r in lines[:-1]], lines[-1]["stats"])


def _plain_greedy(folder) -> list[list[int]]:
    """The reference: the target alone, greedy, loaded by transformers itself."""
    from transformers import AutoModelForCausalLM

    target = AutoModelForCausalLM.from_pretrained(folder)
    out = Engine(target).generate(PROMPTS, SamplingParams(temperature=0, max_new_tokens=NEW,
                                                          stop_token_ids=[BYTES.eos_token_id]))
    return [c.token_ids for c in out]


@pytest.mark.parametrize("flags", [["--drafter", "eagle"], []], ids=["drafter-eagle", "detected-from-files"])
def test_eagle_head_greedy_equals_plain_greedy_and_reports_its_drafts(folders, capsys, flags):
    model = folders / "cache" / NAME / "model"
    rc, (rows, stats) = _generate(capsys, "--model", str(model), *flags, "--draft", str(folders / "head"), "--k", "3")
    assert rc == 0
    assert rows == _plain_greedy(model)
    assert stats["num_draft_tokens"] == 3 and stats["new_tokens"] == sum(map(len, rows))
    assert stats["proposed"] > 0 and 0 < stats["accepted"] <= stats["proposed"]
    assert stats["target_calls"] < stats["new_tokens"]  # accepted drafts saved target calls


def test_prepared_smollm2_head_is_the_default_only_once_cached(folders, capsys):
    cache, model = folders / "cache", folders / "cache" / NAME / "model"
    rc, err = _generate(capsys, "--model", str(model), "--drafter", "eagle", "--cache-dir", str(cache))
    assert rc == 2 and "trajkit models prepare smollm2-135m-instruct-eagle" in err
    prepared = eagle_folder(root=cache)  # what `models prepare` leaves: the head, then the recipe's meta.json
    prepared.mkdir(parents=True)
    for name in ("eagle.pt", "eagle.json"):
        (prepared / name).write_bytes((folders / "head" / name).read_bytes())
    (prepared / "meta.json").write_text(json.dumps({"recipe": "tests"}))
    rc, (rows, stats) = _generate(capsys, "--model", str(model), "--drafter", "eagle", "--cache-dir", str(cache))
    assert rc == 0 and rows == _plain_greedy(model) and stats["accepted"] > 0


def test_no_head_for_another_model_is_an_error(folders, capsys):
    rc, err = _generate(capsys, "--model", str(folders / "cache" / NAME / "model"), "--drafter", "eagle",
                        "--cache-dir", str(folders / "elsewhere"))
    assert rc == 2 and "--drafter eagle needs --draft DIR" in err


@pytest.mark.parametrize("change,message", [
    ({"hidden_size": 48}, "hidden size 32 (the target has 48)"),
    ({"vocab_size": 300}, "a 264-token vocabulary (the target has 300)"),
    ({"num_layers": 3}, "a target of 2 layers, features after layers [1, 2] (the target has 3)"),
    ({"num_layers": 1}, "a target of 2 layers, features after layers [1, 2] (the target has 1)"),
    ({"intermediate_size": 96}, "does not fit the target's decoder layer (size mismatch for layer.mlp"),
], ids=["hidden", "vocab", "more-layers", "fewer-layers", "mlp"])
def test_head_of_another_shape_is_refused_by_name(folders, capsys, tmp_path, change, message):
    other = {**SPEC.__dict__, **change}
    _save(TinySpec(**other), tmp_path / "other")
    rc, err = _generate(capsys, "--model", str(tmp_path / "other"), "--draft", str(folders / "head"))
    assert rc == 2 and message in err and str(folders / "head") in err
