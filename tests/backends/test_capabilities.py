"""The generation seam is declared, not probed: every backend says which optional parts it has
(:class:`trajkit.backends.base.Capabilities`) and callers read that, never ``getattr``/``hasattr``.

The scan reads every module of the package outside ``trajkit/backends/`` with :mod:`ast` (as
``tests/test_imports.py`` reads imports) and fails on a ``getattr``/``hasattr`` whose object is named like a
backend (``backend``, ``engine``, ``served``, ``rollouts``) or whose attribute is a member of the backend
protocol or one a capability guards.
"""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from trajkit.backends.base import GUARDED, Backend, Capabilities, is_backend
from trajkit.backends.registry import as_backend
from trajkit.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SEAM = ROOT / "trajkit" / "backends"
BACKEND_WORDS = ("backend", "engine", "served", "rollouts")
# the protocol's members that name nothing but a backend's (name, close, stats, generate are everyone's;
# policy_version is every Completions' too)
PROTOCOL = {"guarantees", "capabilities", "vocab_size", "num_params", "context_window", "max_model_len",
            "generation_config", "update_weights"}
MEMBERS = PROTOCOL | {m for members in GUARDED.values() for m in members}


def probes(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, source) of each ``getattr``/``hasattr`` call in ``tree`` that probes a backend (module docstring)."""
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2):
            continue
        obj, attr = ast.unparse(node.args[0]).lower(), node.args[1]
        named = isinstance(attr, ast.Constant) and attr.value in MEMBERS
        if named or any(w in obj for w in BACKEND_WORDS):
            out.append((node.lineno, ast.unparse(node)))
    return sorted(out)


def test_no_getattr_probe_of_a_backend_outside_the_seam():
    found = {}
    for path in sorted((ROOT / "trajkit").rglob("*.py")):
        if SEAM in path.parents:
            continue
        hits = probes(ast.parse(path.read_text(), filename=str(path)))
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    assert found == {}


def test_the_scan_sees_the_probes_it_forbids():
    """The scanner against hand-written sources: each probe shape is found, reads of the declaration are not."""
    src = """
getattr(self.backend, "session", None)
callable(getattr(engine, "set_prefix_cache", None))
hasattr(served, "episodes")
getattr(b, "max_model_len", None)
getattr(model, "rotary_emb", None)
backend.capabilities.sessions
getattr(task.env, "timeout_s", None)
"""
    assert [line for line, _ in probes(ast.parse(src))] == [2, 3, 4, 5]


def test_every_capability_names_the_members_it_guards():
    assert list(GUARDED) == [f.name for f in dataclasses.fields(Capabilities)]


def _tiny_backend():
    from trajkit.engine import Engine
    from trajkit.models.spec import TinySpec, build_model

    return as_backend(Engine(build_model(TinySpec(vocab_size=259, hidden_size=16, max_positions=64), seed=0)))


def test_each_declared_capability_has_its_members_and_the_facts_are_the_models():
    from trajkit.backends.trajkit import TrajkitBackend
    from trajkit.backends.vllm import VllmBackend
    from trajkit.envs.client import GenerationClient, ServedBackend

    backend = _tiny_backend()
    served = GenerationClient(backend).served()
    assert isinstance(backend, TrajkitBackend) and isinstance(served, ServedBackend)
    for b in (backend, served):
        assert is_backend(b) and isinstance(b, Backend)
        for flag, members in GUARDED.items():
            if getattr(b.capabilities, flag):
                assert all(hasattr(b, m) for m in members), (type(b).__name__, flag)
    assert backend.context_window == 64 and backend.engine.model.config.max_position_embeddings == 64
    assert served.capabilities == Capabilities(sessions=True, prefix_cache=True, serves=True)
    assert served.context_window == 64 and served.engine is backend.engine
    assert backend.capabilities.prefix_cache and backend.set_prefix_cache(256) is backend.prefix_cache
    for flag in ("adapters", "draft", "actor"):  # vLLM's, as methods on the class (the actor is made at start)
        assert getattr(VllmBackend.capabilities, flag)
    assert all(callable(getattr(VllmBackend, m)) for m in ("update_adapter", "update_draft", "weights_arrived"))
    assert not VllmBackend.capabilities.sessions and not VllmBackend.capabilities.prefix_cache


def test_a_served_backend_without_sessions_refuses_session_and_the_gateway_batches_whole_calls():
    from trajkit.envs.client import GenerationClient
    from trajkit.gateway import Gateway, GatewayConfig
    from trajkit.models.tokenizer import byte_tokenizer

    backend = _tiny_backend()

    class NoSessions:  # the trajkit backend with its sessions and prefix cache not declared
        def __init__(self, inner):
            self.inner = inner
            self.capabilities = dataclasses.replace(inner.capabilities, sessions=False, prefix_cache=False)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    served = GenerationClient(NoSessions(backend)).served()
    with pytest.raises(ConfigError, match="no step-wise sessions"):
        served.session()
    gw = Gateway(served, byte_tokenizer(), GatewayConfig(model_name="tiny"))
    try:
        assert not gw.scheduler.continuous and gw.engine is backend.engine
        assert [n.split(":")[0] for n in gw.degraded] == ["continuous batching off", "trajkit's exact prefix cache off"]
    finally:
        gw.close()


def test_as_backend_wraps_an_engine_and_refuses_what_declares_nothing():
    backend = _tiny_backend()
    assert as_backend(backend) is backend
    with pytest.raises(ConfigError, match="not a generation backend"):
        as_backend(object())
