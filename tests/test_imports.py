"""Import structure of the ``trajkit`` package: no import cycles, and the packages are layered one way.

Layers (a package may import only those listed for it, besides the shared base modules ``trajkit.errors``,
``trajkit.config``, ``trajkit._lazy``, ``trajkit.progress`` and ``trajkit.atomic``): ``models`` at the bottom,
``traces`` on models (the SFT export loads tokenizers through the one loader), ``synth`` on traces, ``engine`` on
models, ``optim`` on models, ``recipes`` (building and caching models) on engine, models and synth, ``gateway`` (a
server over any backend) on backends, engine, models and traces, ``backends`` (the generation-backend seam) on
engine and models, ``envs`` (every
environment: single-turn tasks, datasets, rewards, the tool and agent envs, the registry, Harbor) on gateway,
backends, engine, models, traces and recipes (its cache folder) — never on the trainer; ``rl`` (the trainer) on envs
and the layers below it, and optim; ``cluster`` (Ray) and ``tinker`` (the Tinker-compatible training server) on rl
and what rl reaches; ``trainers`` (the SFT trainer and the resumable phases of a pipeline) on rl and what rl
reaches, and nothing but ``cli``, ``bench`` and the demos imports it; ``audit`` (checks over the files the
others write) on traces and models only; ``cli``, ``bench`` and ``demo`` on anything.

The graph is read from the source with :mod:`ast` (nothing is imported): every ``import`` statement counts,
at module level or inside a function. ``from P import name`` is an edge to ``P.name`` when that is a module,
else to ``P``; ``import P.Q`` is an edge to ``P.Q``. Imports built at run time (``importlib.import_module``
with a computed name) are not seen. Run this file as a script to print every cycle in the package::

    python tests/test_imports.py
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = ("trajkit", "trajkit.errors", "trajkit.config", "trajkit._lazy", "trajkit.progress", "trajkit.atomic")
LAYERS = {  # package -> the packages it may reach (directly or through other modules)
    "trajkit.models": (),
    "trajkit.traces": ("trajkit.models",),
    "trajkit.synth": ("trajkit.traces",),
    "trajkit.engine": ("trajkit.models",),
    "trajkit.optim": ("trajkit.models",),
    "trajkit.recipes": ("trajkit.engine", "trajkit.models", "trajkit.synth", "trajkit.traces"),
    "trajkit.gateway": ("trajkit.backends", "trajkit.engine", "trajkit.models", "trajkit.traces"),
    "trajkit.backends": ("trajkit.engine", "trajkit.models"),
    # every environment, below the trainer: it gets a generation client and locks as arguments, never the trainer
    "trajkit.envs": ("trajkit.gateway", "trajkit.backends", "trajkit.engine", "trajkit.models", "trajkit.traces",
                     "trajkit.recipes", "trajkit.synth"),
    "trajkit.rl": ("trajkit.envs", "trajkit.engine", "trajkit.backends", "trajkit.models", "trajkit.traces",
                   "trajkit.recipes", "trajkit.synth", "trajkit.gateway", "trajkit.optim"),
    "trajkit.cluster": ("trajkit.rl", "trajkit.envs", "trajkit.engine", "trajkit.backends", "trajkit.models",
                        "trajkit.traces", "trajkit.recipes", "trajkit.synth", "trajkit.gateway", "trajkit.optim"),
    # the Tinker-compatible training server: LoRA clients from rl.lora, sampling on the engine, the gateway's uvicorn
    "trajkit.tinker": ("trajkit.rl", "trajkit.envs", "trajkit.engine", "trajkit.backends", "trajkit.models",
                       "trajkit.traces", "trajkit.recipes", "trajkit.synth", "trajkit.gateway", "trajkit.optim"),
    "trajkit.audit": ("trajkit.traces", "trajkit.models"),  # reads files the others write, never their objects
    # the trainers layer (the SFT trainer, resumable pipeline phases, the trainer door): above rl, the cluster
    # trainer and the environments they drive
    "trajkit.trainers": ("trajkit.cluster", "trajkit.rl", "trajkit.envs", "trajkit.engine", "trajkit.backends",
                         "trajkit.models", "trajkit.traces", "trajkit.recipes", "trajkit.synth", "trajkit.gateway", "trajkit.optim"),
}


def module_names(src: Path, package: str) -> dict[str, Path]:
    """``{dotted name: file}`` for every module of ``package`` under the folder ``src``."""
    out = {}
    for path in sorted((src / package.replace(".", "/")).rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _targets(node: ast.AST, name: str, is_package: bool, modules: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = name if is_package else name.rpartition(".")[0]
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    prefix = ".".join(p for p in (base if node.level else "", node.module or "") if p)
    return [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in modules else prefix for a in node.names]


def import_graph(src: Path = ROOT, package: str = "trajkit") -> dict[str, set[str]]:
    """``{module: modules of the package it imports}``, from every import statement in its source."""
    modules = module_names(src, package)
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(_targets(node, name, path.name == "__init__.py", modules))
        graph[name] = {t for t in edges if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted; sorted list."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_no_import_cycles_anywhere_in_trajkit():
    assert cycles(import_graph()) == []


def test_packages_import_only_their_lower_layers():
    graph = import_graph()
    bad = {}
    for package, allowed in LAYERS.items():
        for m in graph:
            if _in(m, (package,)):
                out = sorted(t for t in reachable(graph, m)
                             if t not in BASE and not _in(t, (package, *allowed)))
                if out:
                    bad[m] = out
    assert bad == {}


def test_the_vllm_worker_imports_nothing_of_trajkit():
    """It runs in the vLLM venv's python (other pins), where only itself is importable."""
    assert import_graph()["trajkit.backends.vllm_worker"] == set()


def test_the_verifiers_side_imports_nothing_of_trajkit():
    """The verifiers driver, its setup script and the example tasksets run in the verifiers venv's python."""
    graph = import_graph()
    for name in ("trajkit.envs.verifiers.driver", "trajkit.envs.verifiers.prewarm",
                 "trajkit.envs.verifiers.tasksets.vf_sum"):
        assert graph[name] == set(), name


def test_the_ray_actors_and_the_nccl_path_reach_no_command_line_or_server_code():
    """The actor classes run in another process (maybe another venv: ``cluster.rollout_python``); what they
    import must be the trainer's own layers (the environments its rollouts run, below it, included), and
    ``trajkit.rl`` never reaches back into ``trajkit.cluster``."""
    graph = import_graph()
    for actor_module in ("trajkit.cluster.workers", "trajkit.cluster.nccl"):
        assert not {t for t in reachable(graph, actor_module)
                    if _in(t, ("trajkit.cli", "trajkit.bench", "trajkit.cluster.trainer"))}
    assert not any(_in(t, ("trajkit.cluster",)) for m in graph if _in(m, ("trajkit.rl",)) for t in graph[m])


def test_only_the_command_line_benchmarks_and_demos_import_the_trainers_layer():
    """``trajkit.trainers`` sits above ``rl``: a module outside it that imports it is the CLI, a benchmark or a
    demo (``trajkit.demo*``), never a library layer; and the layer holds the SFT trainer."""
    graph = import_graph()
    users = sorted(m for m, targets in graph.items() if not _in(m, ("trajkit.trainers",))
                   and any(_in(t, ("trajkit.trainers",)) for t in targets))
    assert users and all(_in(m, ("trajkit.cli", "trajkit.bench")) or m.startswith("trajkit.demo") for m in users), users
    assert {"trajkit.trainers.sft", "trajkit.trainers.phases"} <= set(graph)


def test_ecosystem_environment_packages_load_only_when_a_run_chooses_them():
    """``openenv`` loads fastmcp at import (and gradio with its web UI), verifiers pins its own world: naming
    ``task.name=openenv`` in a config, importing the adapter packages and the gateway must not import them."""
    import subprocess

    code = ("import sys, trajkit.envs.openenv, trajkit.envs.openenv.episode, trajkit.envs.openenv.check, "
            "trajkit.envs.registry, trajkit.gateway.app\n"
            "from trajkit.envs.registry import OpenEnvOptions, TaskConfig\n"
            "TaskConfig(name='openenv', options=OpenEnvOptions(env='trajkit.envs.openenv.examples:SumEnv'))\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('openenv', 'fastmcp', 'gradio', 'verifiers', "
            "'websockets')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_the_checker_finds_a_function_level_cycle(tmp_path):
    """The same walk on a hand-made package: a -> b at module level, b -> a inside a function (a cycle, as
    in the old traces.parallel / traces.stats pair), c -> a only (not on it), plus a relative import."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import thing\n")
    (pkg / "b.py").write_text("def thing():\n    from pkg import a\n    return a\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    (pkg / "sub" / "__init__.py").write_text("from .d import x\n")
    (pkg / "sub" / "d.py").write_text("from .. import c\nx = 1\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": {"pkg.a"},
                     "pkg.sub": {"pkg.sub.d"}, "pkg.sub.d": {"pkg.c"}}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]
    assert reachable(graph, "pkg.sub") == {"pkg.sub.d", "pkg.c", "pkg.a", "pkg.b"}


if __name__ == "__main__":
    found = cycles(import_graph())
    for component in found:
        print(" <-> ".join(component))
    print(f"{len(found)} import cycle(s) in trajkit")
    sys.exit(1 if found else 0)
