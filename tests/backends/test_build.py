"""One builder (:mod:`trajkit.backends.build`): the same spec gives the same backend through every entry point
(``trajkit serve``, ``trajkit generate``, the trainer's rollout, ``trajkit bench gateway``), and every list of
backend names (the config's ``Literal``, the CLI's choices) is the registry's."""
from __future__ import annotations

import dataclasses
import typing
from types import SimpleNamespace

import pytest
import torch

from trajkit.backends.build import BackendSpec, build_backend
from trajkit.backends.registry import BACKEND_NAMES, BACKENDS
from trajkit.errors import ConfigError
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer

SPEC = TinySpec(vocab_size=259, hidden_size=16, num_layers=1, max_positions=128)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A tiny target and a tiny draft model as HF folders (the byte tokenizer beside the target)."""
    root = tmp_path_factory.mktemp("build")
    for name, seed in (("target", 0), ("draft", 1)):
        build_model(SPEC, seed=seed).save_pretrained(root / name)
    byte_tokenizer().save_pretrained(root / "target")
    return root


def summary(backend) -> dict:
    """What makes two backends the same: kind, drafter (its class and settings), k, window, the weights."""
    engine = backend.engine
    drafter = engine.drafter
    draft_weights = getattr(getattr(drafter, "model", None), "state_dict", dict)()
    return {"name": backend.name, "drafter": type(drafter).__name__,
            "drafter_settings": ({f.name: getattr(drafter, f.name) for f in dataclasses.fields(drafter)}
                                 if dataclasses.is_dataclass(drafter) else {}),
            "k": engine.config.num_draft_tokens, "window": backend.context_window, "vocab": backend.vocab_size,
            "weights": float(sum(p.double().sum() for p in engine.model.state_dict().values())),
            "draft_weights": float(sum(p.double().sum() for p in draft_weights.values()))}


def _cli(*argv):
    from trajkit.cli.main import build_parser

    return build_parser(list(argv)).parse_args(list(argv))


def _through_serve(folder, *flags):
    from trajkit.cli.serve import _gateway

    gateway = _gateway(_cli("serve", "--model", str(folder), *flags))
    gateway.close()
    return gateway.backend


def _through_generate(folder, *flags):
    from trajkit.cli.generate import _backend

    return _backend(_cli("generate", "--model", str(folder), "--prompt-ids", "1", *flags))


def _through_trainer(folder, kind, k):
    from trajkit.models.load import load_model
    from trajkit.rl.config import load_config
    from trajkit.rl.rollout import Rollout

    cfg = load_config(None, ["policy.source=path", f"policy.path={folder}", f"draft.kind={kind}",
                             f"draft.num_draft_tokens={k}", "task.name=copy"])
    return Rollout(cfg, load_model(folder)).backend


def _through_bench(folder, drafter, k):
    from trajkit.bench.gateway import _gateway

    gateway = _gateway(SimpleNamespace(model=str(folder), drafter=drafter, k=k, max_tokens=8), 4, True)
    gateway.close()
    return gateway.backend


def test_one_spec_gives_one_backend_through_every_entry_point(folders):
    target = folders / "target"
    direct = summary(build_backend(BackendSpec(model=str(target), drafter="ngram", k=2)))
    assert direct["drafter"] == "NgramDrafter" and direct["k"] == 2 and direct["window"] == 128
    assert direct["drafter_settings"] == {"max_ngram": 3, "min_ngram": 1}
    assert summary(_through_serve(target, "--drafter", "ngram", "--k", "2")) == direct
    assert summary(_through_generate(target, "--drafter", "ngram", "--k", "2")) == direct
    assert summary(_through_trainer(target, "ngram", 2)) == direct
    assert summary(_through_bench(target, "ngram", 2)) == direct


def test_a_draft_folder_is_read_by_its_kinds_loader_alike_in_serve_and_generate(folders):
    target, draft = folders / "target", folders / "draft"
    direct = summary(build_backend(BackendSpec(model=str(target), draft=str(draft), k="auto")))
    assert direct["drafter"] == "DraftModel" and direct["k"] == "auto"
    reference = sum(p.double().sum() for p in build_model(SPEC, seed=1).state_dict().values())
    assert direct["draft_weights"] == pytest.approx(float(reference), abs=1e-6)  # the folder's own weights
    for through in (_through_serve, _through_generate):
        assert summary(through(target, "--draft", str(draft), "--k", "auto")) == direct


def test_bad_specs_name_what_to_set(folders):
    with pytest.raises(ConfigError, match="unknown backend 'sglang'"):
        BackendSpec(backend="sglang")
    with pytest.raises(ConfigError, match="integer or 'auto'"):
        BackendSpec(k="three")
    with pytest.raises(ConfigError, match=r"integer >= 1 or 'auto', got 0"):
        BackendSpec(k=0)
    with pytest.raises(ConfigError, match="unknown draft kind 'medusa'"):
        BackendSpec(drafter="medusa")
    with pytest.raises(ConfigError, match="--drafter window needs --draft DIR"):
        build_backend(BackendSpec(model=str(folders / "target"), drafter="window"))
    with pytest.raises(ConfigError, match="needs its venv's python"):  # refused before anything starts
        build_backend(BackendSpec(backend="vllm", model=str(folders / "target")))


def test_every_list_of_backend_names_is_the_registrys():
    from trajkit.rl.config import RolloutConfig

    assert BACKEND_NAMES == tuple(BACKENDS) == ("trajkit", "vllm")
    assert typing.get_args(typing.get_type_hints(RolloutConfig)["backend"]) == BACKEND_NAMES
    for command in ("serve", "generate"):
        parser = _subparser(command)
        action = next(a for a in parser._actions if "--backend" in a.option_strings)
        assert tuple(action.choices) == BACKEND_NAMES


def _subparser(command):
    import argparse

    from trajkit.cli.main import build_parser

    parser = build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def test_the_given_target_is_used_as_is():
    model = build_model(SPEC, seed=3)
    backend = build_backend(BackendSpec(), target=model)
    assert backend.engine.model is model and backend.engine.drafter is None
    assert backend.generate([[1, 2]], None)[0].token_ids is not None
    with torch.no_grad():
        assert backend.engine.model.model.embed_tokens.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
