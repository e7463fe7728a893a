"""``trajkit models prepare smollm2-135m-instruct-eagle`` at a tiny scale on the real SmolLM2-135M: the recipe
samples from the target, trains the head with the training-time test, evaluates it with the engine, caches
it (a second call builds nothing), and the cached head drives the engine exactly (greedy = plain greedy)."""
import json

import pytest
import torch

from trajkit.engine import Engine, SamplingParams
from trajkit.engine.drafters import draft_kind
from trajkit.models.load import load_model
from trajkit.recipes.smollm2_eagle import EagleRecipe, prepare_eagle

TINY = EagleRecipe(prompts=6, new_tokens=12, steps=3, batch_size=2, window=16, eval_prompts=1, eval_tokens=8,
                   shortlist=2048, threads=1)


def test_prepare_builds_caches_and_drives_the_engine_exactly(smollm2_folder, tmp_path):
    before = torch.get_num_threads()
    try:
        path = prepare_eagle(TINY, root=tmp_path, log=lambda _: None)
    finally:
        torch.set_num_threads(before)
    meta = json.loads((path / "meta.json").read_text())
    assert meta["layers"] == [2, 15, 30] and meta["sequences"] == 6
    assert all(0.0 <= a <= 1.0 for a in meta["alpha_held_out"]) and len(meta["alpha_held_out"]) == TINY.ttt_steps
    assert meta["engine_eval"]["k"] == 4 and meta["engine_eval"]["new_tokens"] >= 1
    samples = list((tmp_path / "smollm2-135m-instruct").glob("eagle-samples-*.json"))
    assert len(samples) == 1  # the target's samples are cached on their own
    stamp = (path / "eagle.pt").stat().st_mtime_ns
    assert prepare_eagle(TINY, root=tmp_path) == path and (path / "eagle.pt").stat().st_mtime_ns == stamp

    target = load_model(smollm2_folder).eval()
    head = draft_kind("eagle").load(path, target=target)
    prompt = [[1, 9690, 198, 2683, 359, 253, 5356, 11173, 30, 2]]
    greedy = SamplingParams(temperature=0.0, max_new_tokens=10)
    plain = Engine(target).generate(prompt, greedy)[0].token_ids
    spec = Engine(target, draft_kind("eagle").drafter(head), num_draft_tokens=3).generate(prompt, greedy)
    assert spec[0].token_ids == plain and spec.stats.proposed > 0
