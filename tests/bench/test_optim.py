"""``trajkit bench optim`` end to end on SmolLM2 with a tiny step (2 x 8 tokens, rank 4): every arm runs in
its own process, trains the parameters it should (counts derived by hand from the model's config) and
reports its memory columns. Memory and speed are never asserted (docs/optim.md has the measured table)."""
import json
import platform
from pathlib import Path

import pytest

from trajkit.cli.main import build_parser

PROJ = ("q", "k", "v", "o", "gate", "up", "down")


def _shapes(cfg: dict) -> dict[str, tuple[int, int]]:
    """(in, out) of each projection of one decoder layer."""
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    kv = cfg["num_key_value_heads"] * cfg["head_dim"]
    q = cfg["num_attention_heads"] * cfg["head_dim"]
    return {"q": (h, q), "k": (h, kv), "v": (h, kv), "o": (q, h), "gate": (h, inter), "up": (h, inter),
            "down": (inter, h)}


def test_bench_optim_trains_the_right_parameters_in_each_arm(smollm2_folder, tmp_path, capsys):
    """Every arm but Muon: torch's Muon orthogonalises in bfloat16, which this AVX2-only CPU has no kernels for;
    its one step on SmolLM2 ran over 10 minutes here (a CI run). Muon's optimiser is tested on the tiny model
    (tests/optim/test_muon.py, tests/rl/test_muon_trainer.py); its row is measured with `trajkit bench optim`."""
    cfg = json.loads((Path(smollm2_folder) / "config.json").read_text())
    assert cfg["tie_word_embeddings"] and not cfg["attention_bias"] and not cfg["mlp_bias"]
    shapes, layers, h = _shapes(cfg), cfg["num_hidden_layers"], cfg["hidden_size"]
    projections = layers * sum(i * o for i, o in shapes.values())
    rest = cfg["vocab_size"] * h + layers * 2 * h + h  # tied embedding, two norms per layer, final norm
    rank = 4
    out = tmp_path / "optim.json"
    args = build_parser().parse_args(["bench", "optim", "--rows", "2", "--length", "8", "--micro-batch", "1",
                                      "--rank", str(rank), "--steps", "1", "--threads", "1", "--checkpointing",
                                      "--logits-chunk", "3", "--arms", "adamw,lora,logra,logra-nested",
                                      "--out", str(out)])
    assert args.handler(args) == 0
    res = json.loads(out.read_text())
    arms = {a["arm"]: a for a in res["arms"]}
    assert list(arms) == ["adamw", "lora", "logra", "logra-nested"]
    lora = layers * rank * sum(i + o for i, o in shapes.values())
    vocab = cfg["vocab_size"] * h
    assert arms["adamw"]["trainable_params"] == projections + rest == 134_515_008
    assert arms["lora"]["trainable_params"] == arms["lora"]["adam_state_params"] == lora
    for name in ("logra", "logra-nested"):  # every weight updates; the projections from sketches, no moments
        assert arms[name]["trainable_params"] == arms["adamw"]["adam_state_params"] == projections + rest
    assert arms["logra-nested"]["adam_state_params"] == rest  # tied embedding and norms under the nested AdamW
    assert arms["logra"]["adam_state_params"] == rest - vocab  # the embedding under RowAdam: norms only
    assert all(a["muon_state_params"] == 0 for a in arms.values())
    for a in arms.values():
        assert 0 < a["runtime_rss_mib"] <= a["after_load_rss_mib"] <= a["peak_rss_mib"]
        assert a["training_rss_mib"] == a["peak_rss_mib"] - a["runtime_rss_mib"]
        assert a["step_s"] > 0
    assert arms["adamw"]["peak_vs_adamw"] == arms["adamw"]["training_vs_adamw"] == 1.0
    assert res["checkpointing"] is True and res["logits_chunk"] == 3 and res["micro_batch"] == 1
    glibc = platform.libc_ver()[0] == "glibc"  # mallopt(M_MMAP_THRESHOLD) is glibc's
    assert res["allocator"] == "mmap" and all(a["large_allocations_mmapped"] == glibc for a in arms.values())
    table = capsys.readouterr().out
    assert "activation checkpointing on, logits chunk 3" in table and "peak-runtime" in table
    assert "Adam state" in table and "Muon state" in table and "logra-nested" in table


def test_bench_optim_ranks_halves_what_each_rank_holds(smollm2_folder, tmp_path):
    """``--ranks 2``: each of 2 FSDP2 ranks holds its shard of SmolLM2's 134,515,008 float32 parameters (the
    two shards add up to the whole, about half each), and of each arm's optimiser state, counted by hand from
    SmolLM2's shapes (576 hidden, 1536 MLP, 3 KV heads of 64, 30 layers, a tied 49,152-token embedding):

    - AdamW: two moments of every parameter;
    - LoGRA: one RowAdam moment per output row of the 7 projections (576+192+192+576+1536+1536+576 = 5,184 per
      layer, 155,520 in all) and of the embedding (49,152), AdamW on the 35,136 norm weights.
    Muon is left out: its CPU Newton-Schulz step on SmolLM2 took over 5 minutes here."""
    out = tmp_path / "ranks.json"
    args = build_parser().parse_args(["bench", "optim", "--ranks", "2", "--rows", "2", "--length", "8",
                                      "--micro-batch", "1", "--steps", "1", "--threads", "1", "--rank", "8",
                                      "--arms", "adamw,lora,logra", "--out", str(out)])
    assert args.handler(args) == 0
    rows = json.loads(out.read_text())["ranks_rows"]
    assert [(r["arm"], r["ranks"], r["rank"]) for r in rows] == [(a, 2, k) for a in ("adamw", "logra")
                                                                   for k in (0, 1)]  # lora does not shard
    mib = 4 / 2**20
    whole = 134_515_008 * mib
    state = {"adamw": 2 * 134_515_008, "logra": 155_520 + 49_152 + 2 * 35_136}
    for arm, floats in state.items():
        mine = [r for r in rows if r["arm"] == arm]
        assert sum(r["params_mib"] for r in mine) == whole, arm
        assert sum(r["optim_state_mib"] for r in mine) == pytest.approx(floats * mib, rel=1e-12), arm
        for r in mine:
            assert 0.45 * whole < r["params_mib"] < 0.55 * whole
            assert 0.4 * floats * mib < r["optim_state_mib"] < 0.6 * floats * mib, arm
            assert r["step_peak_rss_mib"] > 0 and r["x1_optim_state_mib"] is None  # no 1-rank run to divide by
    adamw = [r for r in rows if r["arm"] == "adamw"]
    assert sum(r["grads_mib"] for r in adamw) == whole

def test_bench_arms_step_the_trainers_adamw():
    """The AdamW arm (and LoRA's) is the trainer's own: betas (0.9, 0.99), no weight decay, eps 1e-8, as
    ``optim``'s defaults say; torch's own AdamW defaults (betas 0.999, decay 0.01) are not what training steps."""
    import torch

    from trajkit.bench.optim_step import OPTIMIZERS

    _, opt = OPTIMIZERS["adamw"](torch.nn.Linear(3, 2), 4, 1e-3)
    group = opt.param_groups[0]
    assert isinstance(opt, torch.optim.AdamW)
    assert (group["lr"], group["betas"], group["weight_decay"], group["eps"]) == (1e-3, (0.9, 0.99), 0.0, 1e-8)
