"""``policy.fsdp=true``: the policy sharded with FSDP2 over 2 gloo ranks (torchrun on the CPU) trains as the
in-process trainer does.

One torchrun launch (module fixture) runs the sharded runs of 2 steps on the tiny model (AdamW; Muon, each
matrix gathered for its orthogonalisation; a KL reference with micro-batches, minibatches and gradient
checkpointing; LoGRA with micro-batches and minibatches, its sketches reduce-scattered to each rank's rows;
a resume of each of the last two), each compared with the same config trained in this process; and an
``init`` run on a tiny HF folder with tied embeddings: rank 1 builds on the meta device and receives its
shards from rank 0, and the NCCL weight transfer's source is iterated on both ranks. ``shaping.control=random`` gives every group rewards with
signal (the tiny random policy scores 0 on its task), so the updates are not zero.

Tolerance: the weights agree to ``WEIGHT_ATOL`` = 1e-6 (Muon: ``MUON_ATOL``, see there) (measured: 1.2e-7, one float32 ulp of the largest
weights), the metrics to a relative 1e-5. They are not bitwise equal because float32 sums run in another
order: a rank's micro-batches then the cross-rank gradient sum instead of one accumulation, and matmuls
over other batch shapes in the logprob stage. A real error is far larger: a row left out or counted twice
moves AdamW's step (lr 1e-3) by ~1e-4 (``test_the_tolerance_sees_a_changed_update``), and gradients
averaged instead of summed double ``loss/grad_norm``.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from trajkit.errors import ConfigError
from trajkit.rl.trainer import Trainer

HERE = Path(__file__).resolve().parent
TORCHRUN = Path(sys.executable).with_name("torchrun")
WEIGHT_ATOL = 1e-6
# Muon: step 1 is bitwise on the Muon matrices (the gathered update is the unsharded one, orthogonalised by
# the same function; test_muon_gathers_each_matrix_whole). From step 2 the gradients differ by float32
# rounding and torch's Newton-Schulz rounds to bfloat16, where such a difference can flip a rounding
# (measured: 6.6e-6 on one matrix, 0.0 on the others); 1e-5 is under 2% of one Muon step here
# (0.2 sqrt(64) x lr 1e-3 x entries ~0.3). torch's Muon run on the DTensors as they are (the same maths,
# other bfloat16 sums) already missed by 2e-5 to 6e-5 at step 1.
MUON_ATOL = 1e-5
METRIC_RTOL = 1e-5
COMMON = ("steps=2", "shaping.control=random")
ARMS = {"adamw": (), "muon": ("optim.name=muon",),
        "kl_micro": ("loss.kl_coef=0.05", "optim.micro_batch_size=2", "optim.minibatches=2",
                     "optim.gradient_checkpointing=true"),
        "logra": ("optim.name=logra", "optim.logra.rank=8", "optim.micro_batch_size=2", "optim.minibatches=2")}
COMPARED = ("reward/raw", "loss/pg", "loss/grad_norm", "loss/clip_frac", "loss/ratio", "loss/kl_ref",
            "mismatch/mean_abs", "gen/tokens", "length/model_tokens")


def torchrun(runs: list[list[str]], timeout: float = 240.0, **kw) -> subprocess.Popen:
    """``torchrun --nproc_per_node 2 tests/rl/fsdp_runs.py`` over ``runs`` (each a list of overrides)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    cmd = [str(TORCHRUN), "--standalone", "--nproc_per_node", "2", str(HERE / "fsdp_runs.py"),
           *[";".join(r) for r in runs]]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


@pytest.fixture(scope="module")
def tied(tmp_path_factory) -> Path:
    """A tiny HF folder with tied embeddings (:func:`tied_folder`)."""
    return tied_folder(tmp_path_factory.mktemp("tied") / "hf")


@pytest.fixture(scope="module")
def sharded(tmp_path_factory, tied):
    """The sharded runs' output folders: one per arm, ``resumed`` / ``logra_resumed`` (the kl_micro / logra
    arm resumed from its step-1 checkpoint, on 2 ranks), ``failed`` (a run whose reward function raises at step 2) and ``killed`` (a long
    run, last: rank 1 is killed once it has logged a step, which ends the launch); ``"output"``: the
    launch's console output, ``"ended_s"``: seconds from the kill to the launch's end."""
    root = tmp_path_factory.mktemp("fsdp")
    out = {name: root / name for name in (*ARMS, "resumed", "logra_resumed", "failed", "killed", "init")}
    out["hf"] = tied
    out["init"].mkdir()
    runs = [["init", "policy.source=path", f"policy.path={out['hf']}", "loss.kl_coef=0.05",
             f"log.out_dir={out['init']}"],
            [*COMMON, *ARMS["adamw"], f"log.out_dir={out['adamw']}"],
            [*COMMON, *ARMS["muon"], "checkpoint.every=1", f"log.out_dir={out['muon']}"],
            [*COMMON, *ARMS["kl_micro"], "checkpoint.every=1", f"log.out_dir={out['kl_micro']}"],
            [*COMMON, *ARMS["kl_micro"], f"log.out_dir={out['resumed']}",
             f"checkpoint.resume_from={out['kl_micro'] / 'checkpoints' / 'step_000001'}"],
            [*COMMON, *ARMS["logra"], "checkpoint.every=1", f"log.out_dir={out['logra']}"],
            [*COMMON, *ARMS["logra"], f"log.out_dir={out['logra_resumed']}",
             f"checkpoint.resume_from={out['logra'] / 'checkpoints' / 'step_000001'}"],
            [*COMMON, "steps=5", "rewards=[fsdp_runs:failing_reward]", f"log.out_dir={out['failed']}"],
            [*COMMON, "steps=100000", "cluster.timeout_s=30", f"log.out_dir={out['killed']}"]]
    proc = torchrun(runs)
    pid, logged_step = out["killed"] / "pids" / "rank_1", out["killed"] / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while not (pid.is_file() and logged_step.is_file()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    if proc.poll() is None and pid.is_file():
        os.kill(int(pid.read_text()), signal.SIGKILL)
    killed = time.monotonic()
    out["output"], _ = proc.communicate(timeout=120)
    out["ended_s"], out["returncode"] = time.monotonic() - killed, proc.returncode
    for name in (*ARMS, "resumed", "logra_resumed"):
        assert (out[name] / "checkpoints" / "step_000002" / "trainer_state.pt").is_file(), out["output"][-4000:]
    return out


def tied_folder(folder: Path) -> Path:
    """A tiny Llama folder whose output layer is tied to its embeddings (as SmolLM2's), with the byte
    tokenizer; 3 layers, so the root and every layer unit hold weights of odd row counts (259)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from trajkit.models.tokenizer import byte_tokenizer

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaForCausalLM(LlamaConfig(
            vocab_size=259, hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, tie_word_embeddings=True, initializer_range=0.2, rope_theta=500.0))
    model.save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    return folder


def reference(tiny, arm: str, *extra: str) -> tuple[Trainer, list[dict]]:
    t = Trainer(tiny(*COMMON, *ARMS[arm], *extra), logger=False)
    return t, [t.step_once().metrics for _ in range(t.cfg.steps - t.step)]


def logged(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def gathered(folder: Path) -> dict:
    from trajkit.models.load import load_model

    model = load_model(folder / "checkpoints" / "step_000002" / "policy", what="the sharded run's policy/")
    return model.state_dict()


def assert_same(expected_model, expected_metrics: list[dict], folder: Path, atol: float = WEIGHT_ATOL) -> None:
    got = gathered(folder)
    want = expected_model.state_dict()
    assert set(got) == set(want)
    for name, tensor in want.items():
        err = float((got[name] - tensor).abs().max())
        assert err <= atol, f"{name}: max |sharded - in process| = {err:.3g} > {atol:g}"
    rows = logged(folder)[-len(expected_metrics):]
    assert [r["step"] for r in rows] == list(range(3 - len(expected_metrics), 3))
    for want_m, got_m in zip(expected_metrics, rows):
        for key in COMPARED:
            if key in want_m:
                assert got_m[key] == pytest.approx(want_m[key], rel=METRIC_RTOL, abs=1e-7), key


@pytest.mark.parametrize("arm", list(ARMS))
def test_sharded_training_equals_in_process(tiny, sharded, arm):
    model, metrics = reference(tiny, arm)
    assert_same(model.state.side.policy, metrics, sharded[arm], MUON_ATOL if arm == "muon" else WEIGHT_ATOL)
    if arm == "kl_micro":
        assert metrics[-1]["loss/kl_ref"] > 0


def test_muon_gathers_each_matrix_whole(tiny, sharded):
    """After one step the Muon-stepped matrices equal the unsharded step bit for bit."""
    from trajkit.models.load import load_model
    from trajkit.optim.muon import split_parameters

    ref = Trainer(tiny(*COMMON, *ARMS["muon"]), logger=False)
    ref.step_once()
    hidden = {id(p) for p in split_parameters(ref.state.side.policy)[0]}
    names = [n for n, p in ref.state.side.policy.named_parameters() if id(p) in hidden]
    got = load_model(sharded["muon"] / "checkpoints" / "step_000001" / "policy", what="step 1").state_dict()
    assert len(names) == 7
    for name in names:
        assert torch.equal(got[name], ref.state.side.policy.state_dict()[name]), name


def test_ranks_build_on_meta_and_receive_their_shards_of_the_hf_load(sharded):
    """Rank 1 builds the policy on the meta device and gets its rows from rank 0: the gathered policy and
    reference equal the Hugging Face load bit for bit, the output layer stays tied to the embeddings, the
    rotary buffers (in no state dict) are rank 0's (both ranks' logits equal the HF model's), and each rank
    holds exactly its rows of every parameter: half the whole, by torch.chunk's split of the first dim."""
    from trajkit.models.load import load_model

    hf = load_model(sharded["hf"])
    ranks = [torch.load(sharded["init"] / f"init_rank_{r}.pt", weights_only=True) for r in range(2)]
    want = hf.state_dict()
    for name in ("policy", "reference"):
        got = ranks[0][name]
        assert set(got) == set(want), name
        for key, tensor in want.items():
            assert torch.equal(got[key], tensor), f"{name}: {key}"
    with torch.no_grad():
        logits = hf(torch.arange(2, 14).view(2, 6)).logits
    assert [b["whole_builds"] for b in ranks] == [1, 0]  # rank 1 built the skeleton only
    for r, blob in enumerate(ranks):
        assert blob["tied"], r
        torch.testing.assert_close(blob["logits"], logits, rtol=0, atol=1e-6, msg=f"rank {r}")
    unique = list(hf.parameters())  # the tied matrix once
    whole = sum(p.numel() * 4 for p in unique)
    rows = [sum(p.chunk(2)[r].numel() * 4 for p in unique) for r in range(2)]
    assert [b["bytes"] for b in ranks] == rows and sum(rows) == whole
    assert max(rows) / whole < 0.51


def test_the_nccl_source_gathers_each_parameter_whole_in_one_order(sharded):
    """vLLM's NCCL weight transfer from shards (trajkit.cluster.nccl.ShardSource; the GPU send itself is
    tests/cluster/test_nccl.py): both ranks iterate the same parameters in the declared order (the gathers
    are collectives in lockstep), each yielded whole with its declared global shape, rank 0's equal to the HF
    weights bit for bit, the tied matrix once; what is declared is what vLLM's engine sizes its receive
    buffers from."""
    from trajkit.models.load import load_model

    hf = load_model(sharded["hf"])
    ranks = [torch.load(sharded["init"] / f"init_rank_{r}.pt", weights_only=False) for r in range(2)]
    declared = [(name, p.dtype, tuple(p.shape)) for name, p in hf.named_parameters()]
    assert ranks[0]["layout"] == ranks[1]["layout"] == declared
    assert "lm_head.weight" not in [name for name, _, _ in declared]  # tied: sent once, as the embedding
    assert [(n, shape) for n, shape in ranks[1]["sent"]] == [(n, shape) for n, _, shape in declared]
    want = dict(hf.named_parameters())
    assert [n for n, _ in ranks[0]["sent"]] == list(want)
    for name, tensor in ranks[0]["sent"]:
        assert torch.equal(tensor, want[name].detach()), name


def test_a_skeleton_allocates_nothing(tiny, tied):
    """What a rank > 0 builds before its shards come: every parameter and buffer on the meta device, tied
    weights tied, the modules of the real build (same names and shapes)."""
    from trajkit.rl.build import build_models, build_tokenizer, policy_skeleton
    from trajkit.rl.fsdp import local_bytes

    yarn = ("policy.rope_scaling.type=yarn", "policy.rope_scaling.factor=4")
    for cfg in (tiny(*yarn), tiny("policy.source=path", f"policy.path={tied}", "optim.gradient_checkpointing=true"),
                tiny("policy.source=path", f"policy.path={tied}", *yarn)):
        tok = build_tokenizer(cfg)
        skeleton, (built, _) = policy_skeleton(cfg, tok), build_models(cfg, tok)
        assert local_bytes(skeleton) == 0 and all(b.is_meta for b in skeleton.buffers())
        assert {n: p.shape for n, p in skeleton.named_parameters()} == {n: p.shape for n, p in built.named_parameters()}
        assert skeleton.training and skeleton.config.tie_word_embeddings == built.config.tie_word_embeddings
        assert skeleton.config.rope_parameters == built.config.rope_parameters
        assert (skeleton.config.rope_parameters["rope_type"] == "yarn") == cfg.policy.rope_scaling.active
        if built.config.tie_word_embeddings:
            assert skeleton.lm_head.weight is skeleton.model.embed_tokens.weight
        assert skeleton.is_gradient_checkpointing == cfg.optim.gradient_checkpointing


def test_the_tolerance_sees_a_changed_update(tiny, sharded):
    """Guards the comparison: the weights moved far beyond the tolerance, and half the rows (what one rank
    holds) give weights outside it."""
    from trajkit.rl.build import build_models, build_tokenizer

    cfg = tiny(*COMMON)
    initial, _ = build_models(cfg, build_tokenizer(cfg))
    got = gathered(sharded["adamw"])
    moved = max(float((got[k] - v).abs().max()) for k, v in initial.state_dict().items())
    assert moved > 100 * WEIGHT_ATOL
    half, _ = reference(tiny, "adamw", "rollout.group_size=2")
    far = max(float((got[k] - v).abs().max()) for k, v in half.state.side.policy.state_dict().items())
    assert far > 100 * WEIGHT_ATOL


def test_resume_from_a_sharded_checkpoint(tiny, sharded):
    """The kl_micro arm resumed at step 1 on 2 ranks, and in one process (DCP reshards 2 -> 1), both equal
    the straight run."""
    model, metrics = reference(tiny, "kl_micro")
    assert_same(model.state.side.policy, metrics[1:], sharded["resumed"])
    checkpoint = sharded["kl_micro"] / "checkpoints" / "step_000001"
    assert (checkpoint / "sharded" / ".metadata").is_file()
    one, resumed = reference(tiny, "kl_micro", f"checkpoint.resume_from={checkpoint}")
    assert one.step == 2 and len(resumed) == 1
    for name, tensor in model.state.side.policy.state_dict().items():
        torch.testing.assert_close(one.state.side.policy.state_dict()[name], tensor, atol=WEIGHT_ATOL, rtol=0, msg=name)
    assert resumed[0]["loss/grad_norm"] == pytest.approx(metrics[1]["loss/grad_norm"], rel=METRIC_RTOL)


def test_logra_resumes_from_a_sharded_checkpoint(tiny, sharded, monkeypatch):
    """LoGRA's row moments travel in the sharded checkpoint: resumed at step 1 on 2 ranks, and in one process
    (DCP reshards 2 -> 1), the run equals the straight one; without them step 2 would differ (a fresh
    RowAdam moment rescales every row)."""
    model, metrics = reference(tiny, "logra")
    assert_same(model.state.side.policy, metrics[1:], sharded["logra_resumed"])
    checkpoint = sharded["logra"] / "checkpoints" / "step_000001"
    one, resumed = reference(tiny, "logra", f"checkpoint.resume_from={checkpoint}")
    assert one.step == 2 and one.state.side.optimizer.sketches.step == 4  # 2 optimiser steps per RL step
    for name, tensor in model.state.side.policy.state_dict().items():
        torch.testing.assert_close(one.state.side.policy.state_dict()[name], tensor, atol=WEIGHT_ATOL, rtol=0, msg=name)
    assert resumed[0]["loss/grad_norm"] == pytest.approx(metrics[1]["loss/grad_norm"], rel=METRIC_RTOL)
    from trajkit.optim.logra import LoGRA

    def step_only(self, blob):  # what a checkpoint without the row moments would restore
        self.param_groups[0].update(blob["group"])
        self.sketches.step = self.param_groups[0]["step"]
    monkeypatch.setattr(LoGRA, "load_sharded_state_dict", step_only)
    lost, _ = reference(tiny, "logra", f"checkpoint.resume_from={checkpoint}")
    far = max(float((lost.state.side.policy.state_dict()[k] - v).abs().max()) for k, v in model.state.side.policy.state_dict().items())
    assert far > 100 * WEIGHT_ATOL


def test_logra_keeps_its_row_state_per_shard(tiny, sharded):
    """Each rank saved its own row block of every RowAdam moment (DCP's chunks: rows [0, ceil(out/2)) and
    the rest), and the LoGRA arm's matrices moved far beyond the tolerance (a sketch-only update)."""
    import torch.distributed.checkpoint as dcp

    folder = sharded["logra"] / "checkpoints" / "step_000002" / "sharded"
    saved = dcp.FileSystemReader(str(folder)).read_metadata().state_dict_metadata
    moments = {k: v for k, v in saved.items() if k.startswith("logra.") and k.endswith(".row_v")}
    assert len(moments) == 7 + 2  # 7 sketched projections, embedding and output layer
    for key, meta in moments.items():
        out, first = meta.size[0], -(-meta.size[0] // 2)  # FSDP2 splits rows like torch.chunk
        assert sorted((c.offsets[0], c.sizes[0]) for c in meta.chunks) == [(0, first), (first, out - first)], key
    from trajkit.rl.build import build_models, build_tokenizer

    cfg = tiny(*COMMON)
    initial, _ = build_models(cfg, build_tokenizer(cfg))
    got = gathered(sharded["logra"])
    assert float((got["model.layers.0.mlp.up_proj.weight"]
                  - initial.state_dict()["model.layers.0.mlp.up_proj.weight"]).abs().max()) > 100 * WEIGHT_ATOL


def test_the_hf_folder_loads_with_transformers(sharded):
    from transformers import AutoModelForCausalLM

    folder = sharded["adamw"] / "checkpoints" / "step_000002" / "policy"
    model = AutoModelForCausalLM.from_pretrained(folder)
    got = gathered(sharded["adamw"])
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, got[name]), name


def test_a_raising_rank_fails_every_rank_with_its_message(sharded):
    """Rank 0's reward function raises at step 2: both ranks fail that run, rank 1 with rank 0's message."""
    errors = sharded["failed"] / "errors"
    message = "RuntimeError: the reward server went away at step 2"
    assert (errors / "rank_0").read_text() == message
    assert (errors / "rank_1").read_text() == f"ShardError: rank 0 failed: {message}"
    assert [json.loads(line)["step"] for line in (sharded["failed"] / "metrics.jsonl").read_text().splitlines()] == [1]


def test_a_killed_rank_ends_the_run(sharded):
    """Rank 1 killed (SIGKILL) in the middle of a long run: the launch ends, failed, instead of hanging."""
    assert (sharded["killed"] / "metrics.jsonl").is_file(), "the long run never logged a step"
    assert sharded["returncode"] != 0
    assert sharded["ended_s"] < 60
    text = sharded["output"]
    assert "rank      : 1" in text and "Signal 9" in text, text[-3000:]


@pytest.mark.parametrize("override, key", [
    ("optim.name=logra;optim.logra.kl_budget=0.01", "optim.logra.kl_budget"),
    ("optim.logits_chunk=4", "optim.logits_chunk"), ("draft.distill=true", "draft.distill"),
    ("cluster.ray=true", "cluster.ray=true"), ("draft.model.fsdp=true", "draft.model"),
    ("rollout.backend=vllm", "rollout.backend=vllm with policy.fsdp=true under torchrun")])
def test_unsupported_combinations_name_the_key(tiny, override, key):
    extra = ("draft.kind=model",) if override.startswith("draft.") else ()
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        tiny("policy.fsdp=true", *extra, *override.split(";"))


def test_the_world_must_be_a_torchrun_launch_that_divides_the_rows(tiny, monkeypatch):
    from trajkit.rl.fsdp import check_world

    cfg = tiny("policy.fsdp=true")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ConfigError, match=r"policy\.fsdp=true .*WORLD_SIZE=unset"):
        check_world(cfg, 1)
    check_world(cfg, 2)  # 2 prompts x 4 = 8 rows
    with pytest.raises(ConfigError, match=r"rollout\.prompts_per_step x rollout\.group_size = 8 .* 3 ranks"):
        check_world(cfg, 3)
    with pytest.raises(ConfigError, match=r"optim\.minibatches=4 slices over 4 ranks"):
        check_world(tiny("policy.fsdp=true", "optim.minibatches=4"), 4)
    with pytest.raises(ConfigError, match=r"policy\.fsdp=true .*trajkit\.rl\.sharded\.train"):
        Trainer(cfg, logger=False)
