"""Each task kind and optimiser has its own config section (``task.KIND``, ``optim.KIND``, read as ``options``):
the packaged configs load and write back the same, the flat keys of older configs land in the chosen kind's
section, the docs/extending.md examples of registering a kind with knobs work, and the Tinker server's AdamW
is the trainer's."""
from __future__ import annotations

import dataclasses
import logging

import pytest
import yaml

from trajkit.config import from_dict, to_tree
from trajkit.envs import registry
from trajkit.envs.registry import OPTIONS as TASK_OPTIONS
from trajkit.envs.registry import TASKS, HarborOptions, TaskConfig
from trajkit.errors import ConfigError, InputError
from trajkit.optim.config import OPTIONS as OPTIM_OPTIONS
from trajkit.optim.config import AdamwOptions, MuonOptions, OptimConfig
from trajkit.rl.config import TrainConfig, describe, load_config, packaged_configs, to_dict

LOG = "trajkit.config"


@pytest.mark.parametrize("name", sorted(n for n in packaged_configs() if not n.startswith("sft")))
def test_a_packaged_config_writes_back_to_itself(name):
    cfg = load_config(name)
    assert from_dict(TrainConfig, to_dict(cfg)) == cfg
    assert from_dict(TrainConfig, yaml.safe_load(describe(cfg))) == cfg  # --print-config's YAML loads back
    tree = yaml.safe_load(open(packaged_configs()[name]))
    assert to_dict(cfg)["task"][cfg.task.name] == {**to_tree(type(cfg.task.options)()), **tree["task"][cfg.task.name]}


def test_the_sections_hold_the_values_the_file_gives():
    cfg = load_config("grpo_harbor_smollm2")
    assert cfg.task.options == HarborOptions(max_turns=3, timeout_multiplier=4.0)
    cfg = load_config("rep", ["optim.name=muon", "optim.muon.lr=0.02", "optim.muon.nesterov=false"])
    assert cfg.optim.options == MuonOptions(lr=0.02, nesterov=False)
    assert load_config("rep").optim.options == AdamwOptions(kernel="auto")  # adamw's section, its default
    assert load_config("rep", ["optim.adamw.kernel=loop"]).optim.options == AdamwOptions(kernel="loop")


def _flat_value(section: type, key: str):
    field = next(f for f in dataclasses.fields(section) if f.name == key)
    if field.type in ("int", int):
        return field.default + 2
    if field.type in ("float", float):
        return field.default * 2 + 1
    if field.type in ("bool", bool):
        return not field.default
    return "docker" if key == "sandbox" else "x:y" if key in ("env", "adapter") else "w"


@pytest.mark.parametrize("kind", sorted(TASK_OPTIONS))
def test_every_older_flat_task_key_lands_in_its_kinds_section(kind, caplog):
    section = TASK_OPTIONS[kind]
    keys = [f.name for f in dataclasses.fields(section) if f.name not in ("url", "adapter")]  # each excludes another
    needs = {"agent": ["task.path=rows.jsonl"], "harbor": ["task.path=tasks"]}.get(kind, [])
    values = {key: _flat_value(section, key) for key in keys}
    if "min_len" in values:
        values["max_len"] = values["min_len"] + 3
    with caplog.at_level(logging.WARNING, logger=LOG):
        cfg = load_config(None, [f"task.name={kind}", *needs, *(f"task.{k}={v}" for k, v in values.items())])
    assert dataclasses.asdict(cfg.task.options) == {**dataclasses.asdict(section()), **values}
    said = {r.getMessage() for r in caplog.records if r.name == LOG}
    assert said == {f"task.{k} is now task.{kind}.{k} (the flat key is still read)" for k in values}


def test_every_older_flat_key_has_a_section_that_reads_it():
    readers = {f.name for section in TASK_OPTIONS.values() for f in dataclasses.fields(section)}
    assert set(TaskConfig.__flat__) == readers
    for key, (kind, field) in OptimConfig.__flat__.items():
        assert field in {f.name for f in dataclasses.fields(OPTIM_OPTIONS[kind])}, key


def test_an_import_path_tasks_flat_section_is_the_union_of_the_built_in_sections():
    """FlatOptions repeats the built-in sections' keys (an import-path task's flat keys): the same keys, types
    and defaults, and no two sections disagree on a key they share."""
    union: dict = {}
    for section in TASK_OPTIONS.values():
        for f in dataclasses.fields(section):
            assert union.setdefault(f.name, (f.type, f.default)) == (f.type, f.default), (section, f.name)
    assert {f.name: (f.type, f.default) for f in dataclasses.fields(registry.FlatOptions)} == union


def test_a_kinds_name_is_never_a_shared_key():
    for cls, kinds in ((TaskConfig, TASKS), (OptimConfig, OptimConfig.kinds())):
        assert not set(kinds) & {f.name for f in dataclasses.fields(cls)}, cls


def test_a_flat_key_on_the_command_line_overrides_the_files_section(caplog):
    with caplog.at_level(logging.WARNING, logger=LOG):
        cfg = load_config("rep", ["task.max_len=12"])  # rep.yaml: task.rep.max_len 16
    assert cfg == load_config("rep", ["task.rep.max_len=12"])
    assert [r.getMessage() for r in caplog.records if r.name == LOG] == [
        "task.max_len=12 replaces task.rep.max_len=16 (a flat key is an older config's or the command line's); write "
        "task.rep.max_len"]
    assert load_config("rep", ["task.max_len=16"]) == load_config("rep")


def test_a_flat_key_the_kind_does_not_read_is_ignored_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger=LOG):
        cfg = load_config(None, ["task.name=copy", "task.sandbox=docker", "task.max_len=5"])
    assert cfg.task.options.max_len == 5 and not hasattr(cfg.task.options, "sandbox")
    assert "task.sandbox is not read by task.name=copy; ignored" in {r.getMessage() for r in caplog.records}


def test_a_moved_attribute_reads_the_kinds_value_or_names_its_new_place():
    cfg = load_config("grpo_harbor_smollm2")
    assert cfg.task.max_turns == cfg.task.options.max_turns == 3  # an older reader keeps working
    with pytest.raises(AttributeError, match=r"task.min_len moved into the kind's own section: read "
                                             r"task.options.min_len \(task.harbor.min_len in a config file\)"):
        cfg.task.min_len
    with pytest.raises(AttributeError, match=r"optim.muon_lr moved .* read optim.options.lr"):
        cfg.optim.muon_lr
    assert load_config("rep", ["optim.name=muon", "optim.muon.lr=0.02"]).optim.muon_lr == 0.02
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        cfg.task.nothing


def test_an_override_in_either_spelling_wins_over_an_older_files_flat_key(tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text("task:\n  name: harbor\n  path: tasks\n  max_turns: 5\n")
    assert load_config(str(old)).task.options.max_turns == 5
    assert load_config(str(old), ["task.harbor.max_turns=7"]).task.options.max_turns == 7
    assert load_config(str(old), ["task.max_turns=6"]).task.options.max_turns == 6


def test_switching_the_kind_carries_the_settings_both_kinds_read(caplog):
    with caplog.at_level(logging.WARNING, logger=LOG):
        cfg = load_config("rep", ["task.name=copy"])  # rep.yaml: task.rep {min_len 4, max_len 16}
    assert (cfg.task.options.min_len, cfg.task.options.max_len) == (4, 16)
    assert "task.rep is the section of task.name=rep, but task.name=copy; its max_len, min_len carried over, the " \
           "rest ignored" in {r.getMessage() for r in caplog.records}
    assert load_config("rep", ["task.name=copy", "task.copy.max_len=9"]).task.options.max_len == 9
    cfg = load_config("grpo_smollm2", ["task.name=openenv", "task.openenv.env=x:Y"])  # nothing shared
    assert cfg.task.options.max_turns == 3


def test_a_stray_section_carries_only_what_its_own_kind_reads(caplog):
    # openenv has no sandbox, dataset no settings at all: with task.name=openenv or dataset both are refused
    with caplog.at_level(logging.WARNING, logger=LOG):
        cfg = from_dict(TaskConfig, {"name": "harbor", "path": "t", "openenv": {"sandbox": "docker", "max_turns": 5},
                                     "dataset": {"judge_url": "http://judge/v1"}}, "task")
    assert (cfg.options.sandbox, cfg.options.judge_url, cfg.options.max_turns) == ("namespace", None, 5)


@pytest.mark.parametrize("tree, message", [
    ({"name": "harbor", "path": "t", "calculator": {"max_turns": [1, 2]}}, "task.harbor.max_turns must be a int"),
    ({"name": "harbor", "path": "t", "openenv": {"max_turns": 0}}, "task.harbor.max_turns must be >= 1"),
    ({"name": "harbor", "path": "t", "timeout_multiplier": "inf"}, "task.harbor.timeout_multiplier must be a finite"),
    ({"name": "harbor", "path": "t", "harbor": {"timeout_multiplier": 1e400}}, "timeout_multiplier must be a finite"),
    ({"name": "a.b:c", "harbor": {"timeout_multiplier": float("nan")}}, "task.timeout_multiplier must be a finite"),
    ({"name": "a.b:c", "agent": {"harness_timeout_s": float("-inf")}}, "task.harness_timeout_s must be a finite"),
    ({"name": "a.b:c", "calculator": {"tool_timeout_s": 0}}, "task.tool_timeout_s must be > 0"),
    ({"name": "a.b:c", "harbor": {"sandbox": "none"}}, "task.sandbox must be one of"),
])
def test_a_carried_or_flat_value_is_checked_as_the_chosen_kinds(tree, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(TaskConfig, tree, "task")


def test_an_import_path_tasks_flat_section_keeps_every_built_in_range():
    ranges = {k: v for section in TASK_OPTIONS.values() for k, v in section.__ranges__.items()}
    assert registry.FlatOptions.__ranges__ == ranges


def test_a_moved_attribute_never_reads_a_stray_kinds_section():
    cfg = from_dict(TaskConfig, {"name": "copy", "harbor": {"max_turns": 9, "sandbox": "docker"}}, "task")
    with pytest.raises(AttributeError, match="task.max_turns moved into the kind's own section"):
        cfg.max_turns


def test_a_task_given_by_import_path_keeps_its_flat_keys(tmp_path, monkeypatch, caplog):
    from trajkit.models.tokenizer import byte_tokenizer

    (tmp_path / "trajkit_test_flat_task.py").write_text(
        "from trajkit.envs.single_turn import StringTask\n"
        "def make(cfg, seed, tok):\n"
        "    return StringTask('copy', seed, tok, cfg.min_len, cfg.max_len, '01')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger=LOG):
        cfg = load_config(None, ["task.name=trajkit_test_flat_task:make", "task.min_len=2", "task.max_len=3"])
    assert (cfg.task.options.min_len, cfg.task.options.max_len) == (2, 3)
    assert not [r for r in caplog.records if r.name == LOG]  # the flat spelling is this kind's only one
    answers = {registry.make_task(cfg.task, 0, byte_tokenizer()).prompt(i).columns["answer"] for i in range(32)}
    assert answers and all(2 <= len(a) <= 3 and set(a) <= set("01") for a in answers)
    with pytest.raises(ConfigError, match=r"task.min_len \(4\) must be <= task.max_len \(2\)"):
        load_config(None, ["task.name=trajkit_test_flat_task:make", "task.max_len=2"])


def test_options_of_the_wrong_kind_are_refused_in_python():
    with pytest.raises(ConfigError, match=r"task.options for task.name=rep must be StringOptions, got HarborOptions"):
        TaskConfig(name="rep", options=HarborOptions())
    with pytest.raises(ConfigError, match=r"task.options for task.name=dataset must be None"):
        TaskConfig(name="dataset", path="rows.jsonl", options=HarborOptions())
    with pytest.raises(ConfigError, match=r"optim.name must be one of \['adamw', 'logra', 'muon'\]"):
        OptimConfig(name="sgd")


def test_the_extending_pages_task_with_settings(monkeypatch):
    from trajkit.config import Checked
    from trajkit.envs.single_turn import StringTask
    from trajkit.models.tokenizer import byte_tokenizer

    @dataclasses.dataclass
    class ParityOptions(Checked):
        max_len: int = 8
        __section__ = "task.parity"
        __ranges__ = {"max_len": "[1, inf)"}

    def make_parity(cfg, seed, tokenizer):
        return StringTask("copy", seed, tokenizer, 1, cfg.options.max_len, "01")

    monkeypatch.setitem(TASKS, "parity", make_parity)
    monkeypatch.setitem(TASK_OPTIONS, "parity", ParityOptions)
    cfg = load_config(None, ["task.name=parity", "task.parity.max_len=3"])
    assert cfg.task.options == ParityOptions(max_len=3)
    task = registry.make_task(cfg.task, 0, byte_tokenizer())
    answers = [task.prompt(i).columns["answer"] for i in range(16)]
    assert all(set(a) <= set("01") and 1 <= len(a) <= 3 for a in answers) and len(set(answers)) > 2
    with pytest.raises(ConfigError, match="task.parity.max_len must be >= 1, got 0"):
        load_config(None, ["task.name=parity", "task.parity.max_len=0"])


def test_the_extending_pages_optimizer_with_settings(monkeypatch):
    import torch

    from trajkit.config import Checked
    from trajkit.optim.build import OPTIMIZERS
    from trajkit.rl.update import make_optimizer

    @dataclasses.dataclass
    class SgdOptions(Checked):
        momentum: float = 0.0
        __section__ = "optim.sgd"
        __ranges__ = {"momentum": "[0, 1)"}

    def _sgd(model, o, lr):
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=o.options.momentum, weight_decay=o.weight_decay)

    monkeypatch.setitem(OPTIMIZERS, "sgd", _sgd)
    monkeypatch.setitem(OPTIM_OPTIONS, "sgd", SgdOptions)
    cfg = load_config("rep", ["optim.name=sgd", "optim.sgd.momentum=0.9"])
    opt = make_optimizer(torch.nn.Linear(2, 2), cfg)
    assert isinstance(opt, torch.optim.SGD) and opt.param_groups[0]["momentum"] == 0.9
    assert opt.param_groups[0]["lr"] == cfg.optim.lr
    with pytest.raises(ConfigError, match=r"optim.sgd.momentum must be in \[0, 1\), got 1.0"):
        load_config("rep", ["optim.name=sgd", "optim.sgd.momentum=1"])


def test_the_tinker_clients_adamw_is_the_trainers():
    import torch

    from trajkit.optim.build import OPTIMIZERS
    from trajkit.tinker.training import TINKER_ADAM, adam_config

    assert (TINKER_ADAM.lr, TINKER_ADAM.beta1, TINKER_ADAM.beta2, TINKER_ADAM.eps) == (1e-4, 0.9, 0.95, 1e-12)
    got = adam_config({"learning_rate": 0.0, "beta2": 0.999, "eps": None, "weight_decay": 0.1})
    assert got == {"lr": 0.0, "beta1": 0.9, "beta2": 0.999, "eps": 1e-12, "weight_decay": 0.1}  # lr 0: a warm-up
    with pytest.raises(InputError, match=r"beta2 must be in \[0, 1\), got 1.5"):
        adam_config({"beta2": 1.5})
    with pytest.raises(InputError, match=r"learning_rate must be >= 0"):
        adam_config({"learning_rate": -1.0})
    # the registry's AdamW, stepped with Tinker's values, moves the weights as torch's AdamW does
    torch.manual_seed(0)
    ours, ref = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    ref.load_state_dict(ours.state_dict())
    opt = OPTIMIZERS["adamw"](list(ours.parameters()), TINKER_ADAM, TINKER_ADAM.lr)
    values = adam_config({"learning_rate": 1e-2, "beta2": 0.99, "eps": 1e-8, "weight_decay": 0.1})
    opt.param_groups[0].update(lr=values["lr"], betas=(values["beta1"], values["beta2"]), eps=values["eps"],
                               weight_decay=values["weight_decay"])
    # optim.adamw.kernel=auto: torch's fused kernel on CPU parameters (Hugging Face's and TRL's default too)
    want = torch.optim.AdamW(ref.parameters(), lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1, fused=True)
    x = torch.randn(4, 3)
    for model, step in ((ours, opt), (ref, want)):
        for _ in range(3):
            step.zero_grad()
            model(x).pow(2).sum().backward()
            step.step()
    for a, b in zip(ours.parameters(), ref.parameters()):
        assert torch.equal(a, b)


def test_the_adamw_kernel_is_torchs_fused_one_where_it_exists_and_the_others_agree_to_rounding():
    import torch

    from trajkit.optim.build import OPTIMIZERS, adamw_kernel

    torch.manual_seed(0)
    x = torch.randn(16, 8)
    stepped = {}
    for kernel in ("auto", "fused", "foreach", "loop"):
        cfg = load_config("rep", [f"optim.adamw.kernel={kernel}", "optim.weight_decay=0.1"])
        torch.manual_seed(1)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        opt = OPTIMIZERS["adamw"](model, cfg.optim, 1e-2)
        group = opt.param_groups[0]
        assert (group["fused"], group["foreach"]) == {"auto": (True, None), "fused": (True, None),
                                                      "foreach": (None, True), "loop": (None, False)}[kernel]
        for _ in range(5):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
        stepped[kernel] = [p.detach().clone() for p in model.parameters()]
    for kernel in ("fused", "foreach"):
        for a, b in zip(stepped[kernel], stepped["loop"]):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    assert all(torch.equal(a, b) for a, b in zip(stepped["auto"], stepped["fused"]))
    on_meta = [torch.nn.Parameter(torch.empty(3, device="meta"))]
    assert adamw_kernel(on_meta, "auto") == {}  # no fused kernel there: torch's default
    with pytest.raises(ConfigError, match="optim.adamw.kernel=fused: torch has no fused AdamW for these "
                                          "parameters \\(a parameter on meta\\)"):
        adamw_kernel(on_meta, "fused")
    with pytest.raises(ConfigError, match="optim.adamw.kernel must be one of"):
        load_config("rep", ["optim.adamw.kernel=apex"])


@pytest.mark.parametrize("tree, message", [
    ({"name": "harbor", "path": "t", "harbor": {"judge_url": "http://judge\x00.evil/v1"}}, "task.harbor.judge_url"),
    ({"name": "agent", "agent": {"command": "python agent.py --task x\x00y"}}, "task.agent.command"),
    ({"name": "harbor", "path": "tasks\x00/../etc"}, "task.path"),
])
def test_a_string_holding_a_nul_byte_is_refused_naming_its_key(tree, message):
    # the OS would cut such a path or argument at the NUL (or refuse it) far from the config that gave it
    with pytest.raises(ConfigError, match=f"{message} holds a NUL byte"):
        from_dict(TaskConfig, tree, "task")


def test_a_list_item_holding_a_nul_byte_is_refused_naming_its_index():
    from trajkit.rl.config import load_config

    with pytest.raises(ConfigError, match=r"policy.lora.targets\[1\] holds a NUL byte"):
        load_config("rep", ["policy.lora.targets=[q_proj, \"v_proj\\0\"]"])


def test_two_stray_sections_carrying_one_key_with_different_values_are_refused():
    tree = {"name": "harbor", "path": "t", "calculator": {"max_turns": 4}, "openenv": {"max_turns": 5}}
    with pytest.raises(ConfigError, match=r"task.calculator.max_turns=4 and task.openenv.max_turns=5 would both "
                                          r"carry over to task.name=harbor; set task.harbor.max_turns"):
        from_dict(TaskConfig, tree, "task")
    # the chosen kind's own value settles it; equal values are no clash
    assert from_dict(TaskConfig, {**tree, "harbor": {"max_turns": 6}}, "task").options.max_turns == 6
    same = {"name": "harbor", "path": "t", "calculator": {"max_turns": 5}, "openenv": {"max_turns": 5}}
    assert from_dict(TaskConfig, same, "task").options.max_turns == 5


def test_an_integer_too_large_for_a_float_field_is_refused_not_an_overflow():
    # YAML reads 400 digits as an int; math.isfinite(int) raised OverflowError instead of naming the key
    from trajkit.rl.config import load_config

    with pytest.raises(ConfigError, match="task.harbor.timeout_multiplier must be a finite number"):
        load_config(None, ["task.name=harbor", "task.path=t", "task.harbor.timeout_multiplier=1" + "0" * 400])
    with pytest.raises(ConfigError, match="task.harbor.timeout_multiplier must be a finite number"):
        from_dict(TaskConfig, {"name": "harbor", "path": "t", "harbor": {"timeout_multiplier": 10 ** 400}}, "task")


def test_a_flat_key_settles_two_stray_sections_that_disagree():
    # the flat key is read into the chosen kind's section (and replaces its value): it sets the key, as
    # task.harbor.max_turns does, so the stray sections' clash is no error
    tree = {"name": "harbor", "path": "t", "calculator": {"max_turns": 4}, "openenv": {"max_turns": 5}, "max_turns": 7}
    assert from_dict(TaskConfig, tree, "task").options.max_turns == 7


def test_a_harness_time_limit_is_at_most_a_year():
    # 1e10 s is finite, but subprocess.run(capture_output=True, timeout=1e10) raises OverflowError (past ~9.2e9 s)
    # at the first rollout, far from the config that gave it
    import subprocess

    with pytest.raises(OverflowError):
        subprocess.run(["true"], capture_output=True, timeout=1e10, check=False)
    with pytest.raises(ConfigError, match=r"task.agent.harness_timeout_s must be in \(0, 31536000\]"):
        from_dict(TaskConfig, {"name": "agent", "path": "p.jsonl",
                               "agent": {"command": "x", "harness_timeout_s": 1e10}}, "task")
    year = {"name": "agent", "path": "p.jsonl", "agent": {"command": "x", "harness_timeout_s": 31536000}}
    cfg = from_dict(TaskConfig, year, "task")
    assert cfg.options.harness_timeout_s == 31536000.0
