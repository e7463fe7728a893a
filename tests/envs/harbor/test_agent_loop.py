"""``trajkit demo agent`` end to end on a tiny scripted policy with the real sandbox: two seeds, every stage,
the report checked against ``trajkit envs eval`` on the same folders, a rerun that redoes nothing, and bad
overrides refused before anything runs.

The policy is a tiny model that memorised one reply: the Oracle command of seed 0's held-out write-file
instance (built in seconds, cached). So on seed 0's held-out tasks it solves the write-file instance and not the
upper-case one (a family never trained on); on seed 1's it solves neither. Numbers that are not all zero, and
differ by seed and by split, are what the report's bookkeeping has to get right."""
import json
import shutil

import pytest

from trajkit.cli.main import main

FAMILIES = "write-file,upper-case"  # upper-case: a held-out family, generated for the held-out split only


@pytest.fixture(scope="module")
def memorised(tmp_path_factory):
    """A policy folder (model and tokenizer side by side) that answers seed 0's held-out write-file task."""
    from trajkit.envs.harbor.families import generate
    from trajkit.envs.harbor.shell_agent import SYSTEM
    from trajkit.envs.harbor.task import load_task
    from trajkit.envs.harbor.trajectories import oracle_command
    from trajkit.recipes.scripted import ScriptedRecipe, scripted_model

    tmp = tmp_path_factory.mktemp("memorised")
    row = generate("write-file", "heldout", 1, 0, tmp / "heldout")[0]
    task = load_task(tmp / "heldout" / row["id"])
    conversation = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task.instruction},
                    {"role": "assistant", "content": f"```bash\n{oracle_command(task)}\n```"}]
    built = scripted_model([(conversation, None)], ScriptedRecipe(steps=60, vocab_size=512))
    folder = tmp / "policy"
    shutil.copytree(built / "model", folder)
    for f in (built / "tokenizer").iterdir():
        shutil.copy(f, folder / f.name)
    return folder


def _sets(policy) -> list[str]:
    sets = [f"sft.model={policy}", "sft.model_source=path", f"sft.families={FAMILIES}", "sft.train_n=1",
            "sft.heldout_n=1", "sft.steps=2", "sft.batch_size=1", "sft.threads=1", "sft.eval_jobs=2",
            "sft.eval_max_turns=1", "sft.eval_max_tokens=40", "sft.eval_timeout_multiplier=1", "rl.steps=2",
            "rl.threads=1", "rl.rollout.prompts_per_step=1", "rl.rollout.group_size=2", "rl.rollout.max_new_tokens=40",
            "rl.optim.micro_batch_size=2", "rl.eval.every=2", "rl.task.max_turns=1", "rl.log.report_to=[]",
            "rl.log.dump_samples=2"]
    return [x for s in sets for x in ("--set", s)]


def _envs_eval(heldout, model, capsys) -> dict:
    """The reference: ``trajkit envs eval`` with the loop's eval settings."""
    capsys.readouterr()
    assert main(["envs", "eval", str(heldout), "--model", str(model), "--json", "--max-turns", "1",
                 "--max-tokens", "40", "--jobs", "2"]) == 0
    return json.loads(capsys.readouterr().out)


def _split(ref: dict, family_trained: bool) -> float:
    rates = [t["pass_rate"] for t in ref["tasks"] if (t["family"] == "write-file") == family_trained]
    return sum(rates) / len(rates)


def test_the_loop_runs_every_stage_reports_what_envs_eval_measures_and_resumes(needs_sandbox, memorised,  # noqa: F811
                                                                              tmp_path, capsys):
    from PIL import Image

    out = tmp_path / "loop"
    # the uniform stream: the packaged config draws by difficulty, which the next test runs
    argv = ["demo", "agent", "--seeds", "0,1", "--out", str(out), *_sets(memorised),
            "--set", "rl.rollout.sampler=uniform"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    lines = [x for x in first.splitlines() if x.startswith("[")]  # plain progress lines (stdout is not a TTY)
    # per seed: 6 SFT phases (tasks, traces, export, eval_base, losses, eval_sft), 2 RL steps, the RL eval
    assert len(lines) == 18 and lines[-1].startswith("[18/18] seed 1: rl held-out eval |") and "ETA 0 s" in lines[-1]
    assert "[16/18] seed 1: rl step 1/2 |" in first
    report = json.loads((out / "report.json").read_text())

    for seed, arm, model in ((0, "base", memorised), (0, "sft", out / "seed0" / "sft" / "final"),
                             (0, "rl", report["folders"]["0"]["rl"]), (1, "rl", report["folders"]["1"]["rl"])):
        ref = _envs_eval(out / f"seed{seed}" / "sft" / "tasks" / "heldout", model, capsys)
        got = report["per_seed"][str(seed)][arm]
        assert got["all"]["pass_rate"] == ref["pass_rate"] and got["all"]["stderr"] == ref["stderr"], (seed, arm)
        assert got["heldout_instances"]["pass_rate"] == _split(ref, True), (seed, arm)
        assert got["heldout_families"]["pass_rate"] == _split(ref, False), (seed, arm)
        assert got["all"]["n"] == ref["n_tasks"] == 2 and got["errors"] == ref["errors"] == 0
    # the memorised reply: seed 0's held-out write-file instance solved, the held-out family not, seed 1 nothing
    assert report["per_seed"]["0"]["base"]["heldout_instances"]["pass_rate"] == 1.0
    assert report["per_seed"]["0"]["base"]["heldout_families"]["pass_rate"] == 0.0
    assert report["per_seed"]["1"]["base"]["all"]["pass_rate"] == 0.0
    for arm in ("base", "sft", "rl"):  # the mean row: over seeds, its standard error over seeds
        per = [report["per_seed"][s][arm]["all"]["pass_rate"] for s in ("0", "1")]
        mean = report["mean"][arm]["all"]
        assert mean["pass_rate"] == pytest.approx(sum(per) / 2) and mean["n"] == 2
        assert mean["stderr"] == pytest.approx(abs(per[0] - per[1]) / 2)

    for seed in ("0", "1"):  # the RL run's own held-out eval at step 0 (the trainer's path) is the SFT policy's
        metrics = [json.loads(x) for x in (out / f"seed{seed}" / "rl" / "metrics.jsonl").read_text().splitlines()]
        assert metrics[0]["step"] == 0 and metrics[0]["eval/reward"] == report["per_seed"][seed]["sft"]["all"]["pass_rate"]
    for name in ("sft_loss", "rl_reward", "rl_heldout"):
        with Image.open(out / "curves" / f"{name}.png") as img:
            img.verify()
            assert img.format == "PNG" and img.size[0] > 100
    steps = json.loads((out / "seed0" / "sft" / "phases.json").read_text())["losses"]["result"]
    assert len(steps) == 2
    assert set(report["traces"]["0"]) == {"1", "2"} and report["traces"]["0"]["2"]["traces"] == 2
    seeds = report["audit"]["seeds"]
    assert seeds["verdict"] == "FAIL" and seeds["checks"][0]["id"] == "seeds.count"  # 2 seeds: claim refused
    paired = report["audit"]["seeds_paired"]
    assert paired["verdict"] == "FAIL" and [c["id"] for c in paired["checks"]] == ["seeds.count", "seeds.distinct"]
    assert {r["verdict"] for r in report["audit"]["data"].values()} <= {"PASS", "WARN"}
    md = (out / "report.md").read_text()
    assert "held-out families" in md and "audit seeds" in md and "curves/rl_heldout.png" in md
    assert "## `trajkit audit seeds --paired` (each seed's RL vs its own SFT policy): FAIL" in md

    stamps = {p: p.stat().st_mtime_ns for p in (out / "seed0" / "sft" / "phases.json", out / "seed1" / "phases.json",
                                                 out / "seed1" / "sft" / "final" / "model.safetensors")}
    assert main(argv) == 0  # the rerun: every phase of every seed taken from its record
    again = capsys.readouterr().out
    assert "rl step 1/2 (already done)" in again and "sft: losses already done" in again
    assert " ...\n" not in again.replace("already done", "")  # no phase started
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert json.loads((out / "report.json").read_text())["per_seed"] == report["per_seed"]


def test_a_bad_override_is_one_error_naming_the_key(tmp_path, capsys):
    out = tmp_path / "loop"
    for bad, says in (("sft.stepz=2", "'stepz'"), ("rl.rollout.group_sise=2", "'group_sise'"),
                      ("steps=2", "'steps=2': expected sft.KEY=VALUE"), ("rl.policy.path=x", "rl.policy.path: set by")):
        assert main(["demo", "agent", "--seeds", "0", "--out", str(out), "--set", bad]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()  # refused before anything ran


def test_the_loop_trains_composed_kinds_with_the_difficulty_sampler_and_reports_both_held_out_classes(
        needs_sandbox, memorised, tmp_path, capsys):  # noqa: F811
    """The wiring the loop's packaged run uses: composed kinds (one trained, one unseen composition, one with a
    never-trained primitive), the difficulty sampler profiling the training tasks before RL; the report splits
    the held-out classes and logs the sampler's pools and ``groups_all_same``."""
    out = tmp_path / "loop"
    pairs = [x for x in _sets(memorised) if x != "--set" and not x.startswith(("sft.families=", "sft.train_n="))]
    sets = [x for s in pairs for x in ("--set", s)]
    extra = ["sft.families=match-sort-json,match-replace-json,lines-reverse-text", "sft.train_n=2",
             "rl.rollout.sampler=difficulty", "rl.sampler.profile_samples=2", "rl.sampler.window=2"]
    argv = ["demo", "agent", "--seeds", "0", "--out", str(out), *sets, *[x for s in extra for x in ("--set", s)]]
    assert main(argv) == 0
    report = json.loads((out / "report.json").read_text())
    rl = report["per_seed"]["0"]["rl"]
    assert rl["heldout_instances"]["n"] == 1 and rl["heldout_families"]["n"] == 2
    assert rl["unseen_compositions"]["n"] == 1 and rl["unseen_primitives"]["n"] == 1
    train = (out / "seed0" / "sft" / "tasks" / "train" / "tasks.jsonl").read_text()
    assert "match-replace-json" not in train and "lines-reverse-text" not in train and train.count("\n") == 2
    groups = report["groups"]["0"]
    assert groups["sampler"] is not None and groups["sampler"]["profile_trials_total"] == 2 * 2  # 2 items x K=2
    assert (groups["sampler"]["retired"], groups["sampler"]["top_ups"]) == (0, 0)  # no fresh item was profiled
    assert sum(groups["sampler"][k] for k in ("informative", "solved", "unsolved", "unprofiled")) == 2
    assert groups["mean"] is not None
    md = (out / "report.md").read_text()
    assert "unseen compositions" in md and "a primitive never trained" in md and "curves/rl_pool.png" in md
