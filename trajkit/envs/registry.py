"""Task registry: ``task.name`` in a config -> a factory ``(TaskConfig, seed, tokenizer) -> Task``, and the
``task`` section of a run's config (:class:`TaskConfig`), declared beside the factories that read it.

``TaskConfig`` validates its ``name`` against :data:`TASKS`, so a task registered here is accepted by
configs and CLI overrides with no other change; a kind's own knobs are its section class in :data:`OPTIONS`
(``task.harbor.max_turns``, read as ``cfg.options.max_turns``), and what it needs besides its name and
section (a file) is its entry in :data:`NEEDS`. The agent, Harbor, OpenEnv and verifiers tasks import their modules only when chosen
(the gateway's server and Harbor's sandboxes load only then); a name written as an import path
(``my_pkg.tasks:make_task``) is imported instead, so a user's task needs no edit of this file.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Literal

from trajkit.config import Checked, Kinded
from trajkit.errors import ConfigError
from trajkit.envs.data import DatasetTask
from trajkit.envs.imports import import_object, is_import_path
from trajkit.envs.base import Task
from trajkit.envs.single_turn import ChatArithmeticTask, StringTask
from trajkit.envs.toolenv import CalculatorTask
from trajkit.gateway.config import GatewayConfig

TaskFactory = Callable[[Any, int, Any], Task]  # (TaskConfig, seed, tokenizer) -> Task


@dataclass
class StringOptions(Checked):
    """``copy``, ``rev``, ``sort``, ``add``, ``rep``: words of ``min_len`` to ``max_len`` letters drawn from
    ``alphabet``."""

    min_len: int = 4
    max_len: int = 8
    alphabet: str = "abcdefgh"

    __section__ = "task.options"
    __ranges__ = {"min_len": "[1, inf)", "max_len": "[1, inf)"}

    def validate(self) -> None:
        if self.min_len > self.max_len:
            raise ConfigError(f"task.options.min_len ({self.min_len}) must be <= task.options.max_len "
                              f"({self.max_len})")


@dataclass
class ArithOptions(Checked):
    """``arith``, ``arith_explain``: sums of two operands in ``[min_len, max_len]``."""

    min_len: int = 4
    max_len: int = 8

    __section__ = "task.options"
    __ranges__ = StringOptions.__ranges__
    validate = StringOptions.validate


@dataclass
class CalculatorOptions(Checked):
    """``calculator``: expressions of up to ``max_len`` terms, at most ``max_turns`` replies, each tool call
    limited to ``tool_timeout_s``."""

    max_len: int = 8
    max_turns: int = 3
    tool_timeout_s: float = 0.5

    __section__ = "task.options"
    __ranges__ = {"max_len": "[1, inf)", "max_turns": "[1, inf)", "tool_timeout_s": "(0, inf)"}


_GATEWAY = GatewayConfig()  # the defaults of the gateway's own settings


@dataclass
class GatewayOptions:
    """The gateway an episode's calls are served through (``agent``, ``harbor``, ``openenv``, ``verifiers``;
    :class:`trajkit.gateway.GatewayConfig`'s ``max_batch`` and ``prefix_cache``, its defaults):
    ``gateway_max_batch`` rows decoded together, ``gateway_prefix_cache`` reuse of an earlier call's KV states
    (trajkit's engine; vLLM keeps its own prefix caching). Which rows share a batch, and which cached prefix a call
    finds, depend on when the calls arrive, and change a log-prob by float rounding (~1e-5), now and then enough
    to flip a sampled token; ``gateway_max_batch=1 gateway_prefix_cache=false`` computes every call alone and
    prefilled whole, so a run samples the same bits whatever else runs (an evaluation, the other groups), at
    several times the generation time (docs/rl_after_sft.md, seventeenth round)."""

    gateway_max_batch: int = _GATEWAY.max_batch
    gateway_prefix_cache: bool = _GATEWAY.prefix_cache

    __ranges__ = {"gateway_max_batch": "[1, inf)"}


@dataclass
class AgentOptions(GatewayOptions, Checked):
    """``agent``: the harness's shell ``command`` (``{base_url}``, ``{api_key}``, ``{model}`` and ``{task}``
    filled in per run), each run limited to ``harness_timeout_s``; ``gateway_*``: :class:`GatewayOptions`."""

    command: str | None = None
    harness_timeout_s: float = 300.0

    __section__ = "task.options"
    # harness_timeout_s: a year at most (past ~9.2e9 s subprocess.run(timeout=) overflows)
    __ranges__ = {**GatewayOptions.__ranges__, "harness_timeout_s": "(0, 31536000]"}


@dataclass
class HarborOptions(GatewayOptions, Checked):
    """``harbor``: trials in a ``sandbox`` with trajkit's shell agent (at most ``max_turns`` replies); with
    ``judge_url`` (an OpenAI-compatible ``.../v1``) and ``judge_model`` the reward is Polar's rubric reward;
    ``timeout_multiplier`` scales every task's agent time limit (Harbor's ``--timeout-multiplier``);
    ``gateway_*``: :class:`GatewayOptions`."""

    max_turns: int = 3
    sandbox: Literal["namespace", "docker"] = "namespace"
    judge_url: str | None = None
    judge_model: str = "judge"
    timeout_multiplier: float = 1.0

    __section__ = "task.options"
    __ranges__ = {**GatewayOptions.__ranges__, "max_turns": "[1, inf)", "timeout_multiplier": "(0, inf)"}


@dataclass
class OpenEnvOptions(GatewayOptions, Checked):
    """``openenv``: the environment ``env`` (``pkg.module:Class``, in process) or ``url`` (a local server's
    ``ws://127.0.0.1:PORT``), observations as user turns after ``system_prompt``, replies made actions by
    ``adapter`` (``pkg.module:obj``; default: the action's one text field, or ``action_field``, with the
    observation's text field, or ``observation_field``), at most ``max_turns`` replies; ``gateway_*``:
    :class:`GatewayOptions`."""

    env: str | None = None
    url: str | None = None
    adapter: str | None = None
    system_prompt: str | None = None
    action_field: str | None = None
    observation_field: str | None = None
    max_turns: int = 3

    __section__ = "task.options"
    __ranges__ = {**GatewayOptions.__ranges__, "max_turns": "[1, inf)"}

    def validate(self) -> None:
        for key in ("action_field", "observation_field"):
            if getattr(self, key) is not None and self.adapter is not None:
                raise ConfigError(f"task.options.{key} configures the default adapter, but "
                                  f"task.options.adapter={self.adapter} is given: unset one of them")


@dataclass
class VerifiersOptions(GatewayOptions, Checked):
    """``verifiers``: the ``verifiers.v1`` taskset ``env`` (its id) with ``env_config`` (a JSON object of the
    taskset's config fields), at most ``max_turns`` model turns; ``gateway_*``: :class:`GatewayOptions`."""

    env: str | None = None
    env_config: str | None = None
    max_turns: int = 3

    __section__ = "task.options"
    __ranges__ = {**GatewayOptions.__ranges__, "max_turns": "[1, inf)"}


def _string(op: str) -> TaskFactory:
    return lambda c, seed, tok: StringTask(op, seed, tok, c.options.min_len, c.options.max_len, c.options.alphabet)


def _arith(style: str) -> TaskFactory:
    return lambda c, seed, tok: ChatArithmeticTask(seed, tok, c.options.min_len, c.options.max_len, style=style)


TASKS: dict[str, TaskFactory | str] = {
    "copy": _string("copy"), "rev": _string("rev"), "sort": _string("sort"), "add": _string("add"),
    "rep": _string("rep"),
    "calculator": lambda c, seed, tok: CalculatorTask(seed, tok, c.options.max_len, c.options.max_turns,
                                                      c.options.tool_timeout_s),
    "arith": _arith("short"), "arith_explain": _arith("explain"),
    "dataset": lambda c, seed, tok: DatasetTask(c.path, tok, c.eval_path, seed=seed, eval_fraction=c.eval_fraction,
                                                strict=c.strict, shuffle=c.shuffle),
    "agent": lambda c, seed, tok: _agent(c, seed, tok),
    "harbor": lambda c, seed, tok: _harbor(c, seed, tok),
    "openenv": lambda c, seed, tok: _openenv(c, seed, tok),
    "verifiers": lambda c, seed, tok: _verifiers(c, seed, tok),
}

@dataclass
class FlatOptions(Checked):
    """A task given by import path (``task.name=my_pkg.tasks:make_task``): the keys of every built-in kind,
    written flat (``task.max_len=12``: the name cannot key a section), read as ``cfg.options.max_len`` or, as
    before, ``cfg.max_len``."""

    min_len: int = 4
    max_len: int = 8
    alphabet: str = "abcdefgh"
    max_turns: int = 3
    tool_timeout_s: float = 0.5
    command: str | None = None
    harness_timeout_s: float = 300.0
    sandbox: Literal["namespace", "docker"] = "namespace"
    judge_url: str | None = None
    judge_model: str = "judge"
    timeout_multiplier: float = 1.0
    env: str | None = None
    url: str | None = None
    adapter: str | None = None
    system_prompt: str | None = None
    env_config: str | None = None
    action_field: str | None = None
    observation_field: str | None = None
    gateway_max_batch: int = _GATEWAY.max_batch
    gateway_prefix_cache: bool = _GATEWAY.prefix_cache

    __section__ = "task"
    __ranges__ = {**StringOptions.__ranges__, **CalculatorOptions.__ranges__, **AgentOptions.__ranges__,
                  **HarborOptions.__ranges__}

    def validate(self) -> None:
        if self.min_len > self.max_len:
            raise ConfigError(f"task.min_len ({self.min_len}) must be <= task.max_len ({self.max_len})")


# kind -> its own section of TaskConfig (``task.KIND: {...}``, read as ``task.options``); absent: no knobs
OPTIONS: dict[str, type] = {
    **{op: StringOptions for op in ("copy", "rev", "sort", "add", "rep")},
    "arith": ArithOptions, "arith_explain": ArithOptions, "calculator": CalculatorOptions,
    "agent": AgentOptions, "harbor": HarborOptions, "openenv": OpenEnvOptions, "verifiers": VerifiersOptions,
}

_ROWS = "task.path=FILE (.jsonl or .parquet with a 'prompt' column)"
# kind -> {key it cannot run without (a TaskConfig key, else one of its own section's): what to set}
NEEDS: dict[str, dict[str, str]] = {
    "dataset": {"path": _ROWS},
    "agent": {"path": _ROWS, "command": "task.agent.command: the harness's shell command, with {base_url}, "
                                        "{api_key}, {model} and {task} filled in per run"},
    "harbor": {"path": "task.path=DIR (a Harbor task folder or a folder of them)"},
    "verifiers": {"env": "task.verifiers.env=TASKSET_ID (a verifiers.v1 taskset importable in the verifiers venv, "
                         "e.g. vf-sum; task.path=DIR adds a folder to its import path)"},
}

# the flat keys of configs before the kinds had sections (FlatOptions' keys, the built-in sections' union):
# each is read from the chosen kind's section
_FLAT = tuple(f.name for f in dataclasses.fields(FlatOptions))


@dataclass
class TaskConfig(Kinded):
    """Which task: a name in :data:`trajkit.envs.registry.TASKS` or an import path ``pkg.mod:make_task`` (a
    factory ``(TaskConfig, seed, tokenizer) -> Task``), with the kind's own settings under its name
    (``task: {name: harbor, harbor: {max_turns: 4}}``, read as ``task.options``; :data:`OPTIONS`).
    ``dataset`` reads prompts from ``path`` (JSONL or Parquet with a ``prompt`` column; held-out ``eval_path``
    or the last ``eval_fraction`` of the rows). ``agent`` reads its tasks the same way and runs the harness
    command once per group member against a gateway over the policy's engine (:mod:`trajkit.envs.agent`).
    ``harbor`` runs Harbor tasks from the folder ``path`` as trials (:mod:`trajkit.envs.harbor.rltask`).
    ``openenv`` plays episodes of an OpenEnv environment, ``path`` a folder put first on the import path
    before its ``env`` and ``adapter`` are imported (:mod:`trajkit.envs.openenv.rltask`). ``verifiers`` runs
    episodes of a ``verifiers.v1`` taskset with verifiers' ``null`` harness against the gateway, ``path`` a
    folder added to the verifiers venv's import path (:mod:`trajkit.envs.verifiers.rltask`).
    ``shuffle``: a dataset's train rows in a fresh order every epoch (by run seed), else in file order
    (TRL's ``shuffle_dataset``). ``latency_median_s`` > 0 adds a lognormal wait (that median, ``latency_sigma``)
    to every episode, the batch waiting for its slowest (:mod:`trajkit.envs.latency`: long-tailed tool
    calls for benchmarks). The flat keys of older configs (``task.max_turns``) are read into the chosen
    kind's section with a warning; one the kind does not read is ignored, as before."""

    name: str = "rep"
    path: str | None = None
    eval_path: str | None = None
    eval_fraction: float = 0.0
    strict: bool = False
    shuffle: bool = True
    latency_median_s: float = 0.0
    latency_sigma: float = 1.0
    options: Any = None

    __section__ = "task"
    __ranges__ = {"eval_fraction": "[0, 1)", "latency_median_s": "[0, inf)", "latency_sigma": "[0, inf)"}
    __flat__ = {key: (None, key) for key in _FLAT}
    __strays__ = "ignore"

    @classmethod
    def kinds(cls) -> dict[str, type | None]:
        return {name: OPTIONS.get(name) for name in TASKS}

    @classmethod
    def unregistered(cls, name: str) -> type | None:
        return FlatOptions if is_import_path(name) else None

    def validate(self) -> None:
        if self.name not in TASKS and not is_import_path(self.name):
            raise ConfigError(f"task.name must be one of {sorted(TASKS)} or an import path 'pkg.module:factory', "
                              f"got {self.name!r}")
        shared = {f.name for f in dataclasses.fields(self)}
        for key, what in NEEDS.get(self.name, {}).items():
            if not getattr(self if key in shared else self.options, key):
                raise ConfigError(f"task.name={self.name} needs {what}")
        if self.name == "openenv" and (self.options.env is None) == (self.options.url is None):
            raise ConfigError("task.name=openenv needs exactly one of task.openenv.env=pkg.module:Class (the "
                              "environment in process) or task.openenv.url=ws://127.0.0.1:PORT (a local OpenEnv "
                              "server)")


def _agent(c, seed: int, tokenizer) -> Task:
    # imported here: the gateway (FastAPI, uvicorn) loads only when an agent task runs
    from trajkit.envs.agent import AgentTask, gateway_config

    return AgentTask(c.path, tokenizer, c.options.command, c.eval_path, seed=seed, eval_fraction=c.eval_fraction,
                     timeout_s=c.options.harness_timeout_s, strict=c.strict, gateway=gateway_config(c.options))


def _harbor(c, seed: int, tokenizer) -> Task:
    from trajkit.envs.harbor.rltask import make_task as harbor_task

    return harbor_task(c, seed, tokenizer)


def _openenv(c, seed: int, tokenizer) -> Task:
    # imported here: openenv-core (fastmcp at import) and the gateway load only when an OpenEnv task runs
    from trajkit.envs.openenv.rltask import make_task as openenv_task

    return openenv_task(c, seed, tokenizer)


def _verifiers(c, seed: int, tokenizer) -> Task:
    # imported here: the verifiers driver (a child process in the verifiers venv) starts only when chosen
    from trajkit.envs.verifiers.rltask import make_task as verifiers_task

    return verifiers_task(c, seed, tokenizer)


def make_task(cfg, seed: int, tokenizer) -> Task:
    """The task ``cfg.name`` (already validated by ``TaskConfig``) for ``seed``, encoding with ``tokenizer``."""
    if is_import_path(cfg.name):
        factory = import_object(cfg.name, "task.name")
        if not callable(factory):
            raise ConfigError(f"task.name: {cfg.name!r} is not callable (a task factory takes "
                              "(TaskConfig, seed, tokenizer))")
        return factory(cfg, seed, tokenizer)
    factory = TASKS[cfg.name]
    if isinstance(factory, str):
        factory = import_object(factory, "task.name")
    return factory(cfg, seed, tokenizer)
