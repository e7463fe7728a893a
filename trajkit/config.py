"""Dataclass configs: one source of truth for defaults, shared by Python callers, YAML files and CLI flags.

``from_dict`` rejects unknown keys with a message naming them; ``Checked`` type-checks every scalar field
of a config dataclass after construction (floats must be finite), checks the intervals its ``__ranges__``
declare (``{"beta1": "[0, 1)", "lr": "(0, inf)"}``) and runs its ``validate``; ``add_arguments`` derives argparse
flags from the dataclass fields (so the CLI never keeps a second list of defaults); ``from_args`` reads
them back. ``load_tree`` reads a YAML file (or a config shipped in ``trajkit/configs``) plus dotted ``key=value``
overrides into the nested dict ``from_dict`` builds from; ``describe`` writes any config back as commented YAML,
``to_tree`` as the plain dict a YAML file of it would hold.

A :class:`Kinded` section's ``name`` chooses a kind from a registry, and each kind declares its own small
section of knobs (``optim: {name: muon, muon: {momentum: 0.9}}``; ``task: {name: harbor, harbor: {max_turns: 4}}``),
held as the section's ``options``: the knobs grow with the registry, not with one flat union of keys.
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import logging
import math
import os
import sys
import types
import typing
from typing import Any, Literal, TypeVar, get_args, get_origin

from trajkit.errors import ConfigError

T = TypeVar("T")


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def check_keys(cls: type, keys, where: str = "") -> None:
    """Raise ConfigError naming every key that ``cls`` does not declare, with close matches."""
    known = [f.name for f in dataclasses.fields(cls)]
    built = set()
    if isinstance(cls, type) and issubclass(cls, Kinded):  # options is written as the kind's section
        known = [k for k in known if k != "options"] + [k for k, section in cls.kinds().items() if section]
        built = {"options"}  # already folded from that section by from_dict
    unknown = [k for k in keys if k not in known and k not in built]
    if not unknown:
        return
    parts = []
    for k in unknown:
        close = difflib.get_close_matches(k, known, n=1)
        parts.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    loc = f" in {where}" if where else ""
    raise ConfigError(f"unknown key(s) for {cls.__name__}{loc}: {', '.join(parts)}; "
                      f"known keys: {', '.join(known)}")


def from_dict(cls: type[T], data: dict[str, Any], where: str = "") -> T:
    """Build ``cls`` from a plain dict, recursing into nested dataclass fields; unknown keys raise."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{cls.__name__}{' in ' + where if where else ''} must be a mapping, got {type(data).__name__}")
    if isinstance(cls, type) and issubclass(cls, Kinded):
        data = cls.fold_options(data)
    check_keys(cls, data.keys(), where)
    types_ = _field_types(cls)
    kwargs = {}
    for key, value in data.items():
        tp = types_[key]
        name = f"{where}.{key}" if where else key
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, (dict, tp)):
                raise ConfigError(f"{name} is a section (set its keys, e.g. {name}.{dataclasses.fields(tp)[0].name}=...), "
                                  f"got {value!r}")
            if isinstance(value, dict):
                value = from_dict(tp, value, name)
        kwargs[key] = value
    return cls(**kwargs)


def _scalar_type(tp: Any):
    """(argparse type callable, choices) for a field annotation; None when not flag-able."""
    origin = get_origin(tp)
    if origin is Literal:
        choices = get_args(tp)
        return type(choices[0]), list(choices)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return _scalar_type(args[0])
        return None
    if tp in (int, float, str):
        return tp, None
    if tp is bool:
        return _parse_bool, None
    return None


def _parse_bool(text: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _help_for(cls: type, name: str) -> str:
    doc = getattr(cls, "__field_docs__", {}) or {}
    return doc.get(name, "")


def add_arguments(parser: argparse.ArgumentParser, cls: type, prefix: str = "") -> None:
    """Add one ``--flag`` per scalar field of ``cls``; defaults are shown but taken from the dataclass."""
    for f in dataclasses.fields(cls):
        parsed = _scalar_type(_field_types(cls)[f.name])
        if parsed is None:
            continue
        kind, choices = parsed
        default = f.default if f.default is not dataclasses.MISSING else None
        flag = "--" + (prefix + f.name).replace("_", "-")
        help_ = _help_for(cls, f.name)
        if kind is _parse_bool:
            parser.add_argument(flag, dest=prefix + f.name, action=argparse.BooleanOptionalAction,
                                default=None, help=f"{help_} (default: {default})".strip())
            continue
        parser.add_argument(flag, dest=prefix + f.name, type=kind, choices=choices, default=None,
                            help=f"{help_} (default: {default})".strip())


def from_args(cls: type[T], args: argparse.Namespace, prefix: str = "", **extra: Any) -> T:
    """Build ``cls`` from flags added by :func:`add_arguments`; flags left unset keep dataclass defaults."""
    kwargs = dict(extra)
    for f in dataclasses.fields(cls):
        value = getattr(args, prefix + f.name, None)
        if value is not None:
            kwargs[f.name] = value
    return cls(**kwargs)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b=3`` -> (["a", "b"], 3); the value is parsed as YAML so numbers and booleans keep their type."""
    import yaml

    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like key=value (e.g. rl.lr=1e-5)")
    key, raw = text.split("=", 1)
    try:
        return key.strip().split("."), yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {text!r}: the value is not valid YAML ({getattr(exc, 'problem', exc)}); "
                          "quote it") from None


class _BadValue(ConfigError):
    """A value of the field's type that is refused (not finite, a NUL byte)."""


def _check_field(owner: str, name: str, tp: Any, value: Any) -> Any:
    """Return ``value`` (YAML's '1e-3' string turned into a float) or raise naming ``owner.name``."""
    origin = get_origin(tp)
    if origin is Literal:
        if value not in get_args(tp):
            raise ConfigError(f"{_qual(owner, name)} must be one of {list(get_args(tp))}, got {value!r}")
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in get_args(tp):
            return value
        for arg in get_args(tp):
            if arg is type(None):
                continue
            try:
                return _check_field(owner, name, arg, value)
            except _BadValue:
                raise  # the type matched, the value did not: that is the message, not "must be X | None"
            except ConfigError:
                continue
        raise ConfigError(f"{_qual(owner, name)} must be {tp}, got {value!r}")
    if origin is list:
        (item,) = get_args(tp) or (Any,)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{_qual(owner, name)} must be a list, got {value!r}")
        return [value_ if item is Any else _check_field(owner, f"{name}[{i}]", item, value_)
                for i, value_ in enumerate(value)]
    if tp is float and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    ok = {float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          int: lambda v: isinstance(v, int) and not isinstance(v, bool),
          bool: lambda v: isinstance(v, bool), str: lambda v: isinstance(v, str)}.get(tp)
    if ok is not None and not ok(value):
        raise ConfigError(f"{_qual(owner, name)} must be a {tp.__name__}, got {value!r}")
    if tp is float and not abs(value) <= sys.float_info.max:  # inf, nan, or an int such as 10**400 (no float)
        raise _BadValue(f"{_qual(owner, name)} must be a finite number, got {value!r}")
    if tp is str and "\x00" in value:  # a path, URL or command the OS would cut or refuse later, far from here
        raise _BadValue(f"{_qual(owner, name)} holds a NUL byte (\\x00), which no path, URL or command may: "
                          f"got {value!r}")
    return float(value) if tp is float else value


def check_value(name: str, tp: type, value: Any, interval: str | None = None) -> Any:
    """``value`` checked (and coerced) as a config field ``name`` of type ``tp`` within ``interval``
    (``"[0, 1)"``), outside a config dataclass; a :class:`ConfigError` naming ``name`` otherwise."""
    value = _check_field("", name, tp, value)
    if interval is not None:
        _check_range("", name, value, interval)
    return value


def _qual(owner: str, name: str) -> str:
    return f"{owner}.{name}" if owner else name


def _check_range(owner: str, name: str, value: Any, interval: str) -> None:
    """``interval`` like ``"[0, 1)"`` or ``"(0, inf)"``; None values are not checked."""
    if value is None or isinstance(value, str):
        return
    lo_text, hi_text = (part.strip() for part in interval[1:-1].split(","))
    lo, hi = float(lo_text), float(hi_text)
    ok_lo = value > lo if interval[0] == "(" else value >= lo
    ok_hi = value < hi if interval[-1] == ")" else value <= hi
    if not (ok_lo and ok_hi):
        if math.isinf(hi):
            need = f"{'>' if interval[0] == '(' else '>='} {lo_text}"
        else:
            need = f"in {interval}"
        raise ConfigError(f"{_qual(owner, name)} must be {need}, got {value!r}")


class Checked:
    """Mixin: type-check (and coerce) every scalar field after construction, check the ``__ranges__``
    intervals, then run :meth:`validate`. Messages name fields ``SECTION.NAME`` (``__section__``, else the
    class name)."""

    __ranges__: dict[str, str] = {}
    __section__: str | None = None  # "" names the fields alone (a top-level config)

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        owner = type(self).__name__ if self.__section__ is None else self.__section__
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if dataclasses.is_dataclass(hints[f.name]):
                if not isinstance(value, hints[f.name]):
                    raise ConfigError(f"{_qual(owner, f.name)} must be a {hints[f.name].__name__} section, got {value!r}")
                continue
            object.__setattr__(self, f.name, _check_field(owner, f.name, hints[f.name], value))
        for name, interval in self.__ranges__.items():
            _check_range(owner, name, getattr(self, name), interval)
        self.validate()

    def validate(self) -> None:
        """Cross-field checks; subclasses override."""


_log = logging.getLogger("trajkit.config")


def _default_of(cls: type, key: str) -> Any:
    """The default of the field ``key`` of the dataclass ``cls`` (None when it has no such field)."""
    return next((f.default for f in dataclasses.fields(cls) if f.name == key), None)


class Kinded(Checked):
    """Mixin for a section whose ``name`` chooses a kind, each kind with its own section of knobs.

    A subclass declares ``name: str`` and, last, ``options: Any = None``, and implements :meth:`kinds`
    (kind -> its section class, or None for a kind without knobs). In a tree the kind's section is keyed by
    the kind's name (``{name: muon, muon: {momentum: 0.9}}``); :func:`from_dict` builds it into ``options``
    (its defaults when absent). The section of another kind than ``name`` is refused, or ignored with a
    warning when ``__strays__ == "ignore"`` (a config file's task, its ``task.name`` switched on the command
    line; the keys both kinds read are carried over, and two such sections giving one key different values
    are refused unless the chosen kind's section sets it). ``__flat__`` maps the flat keys of older configs to
    ``(kind, key)`` (kind None: the chosen one): such a key is read into the chosen kind's section with one
    warning naming the new key, and replaces the section's value (a command line's flat key overrides a config
    file's section). A flat key the chosen kind does not read is ignored with a warning when ``__strays__ ==
    "ignore"``, else refused when it differs from its default. Reading a moved attribute
    (``cfg.task.max_turns``) gives the chosen kind's value when its section has that key (older readers keep
    working), else raises an AttributeError naming ``options``. :meth:`unregistered` gives a name outside the
    registry (an import path) a section whose keys stay flat."""

    __flat__: dict[str, tuple[str | None, str]] = {}
    __strays__: str = "refuse"

    @classmethod
    def kinds(cls) -> dict[str, type | None]:
        raise NotImplementedError

    @classmethod
    def _owner(cls) -> str:
        return cls.__section__ or cls.__name__

    @classmethod
    def options_class(cls, name: str) -> type | None:
        """The section class of the kind ``name``; None for a kind without knobs; :meth:`unregistered` for a
        name outside the registry (a task given by import path)."""
        kinds = cls.kinds()
        return kinds[name] if name in kinds else cls.unregistered(name)

    @classmethod
    def unregistered(cls, name: str) -> type | None:
        """The section of a name outside :meth:`kinds`, whose keys stay flat (they cannot be keyed by the
        name); None: no section."""
        return None

    @classmethod
    def _chosen(cls, data: dict) -> tuple[Any, type | None, set[str]]:
        """The tree's kind (its ``name``, else the default), that kind's section class and the keys it reads."""
        name = data.get("name", _default_of(cls, "name"))
        own = cls.options_class(name) if isinstance(name, str) else None
        return name, own, {f.name for f in dataclasses.fields(own)} if own is not None else set()

    @classmethod
    def _moved_field(cls, key: str, name: Any, reads: set[str]) -> str | None:
        """The chosen kind's key the flat ``key`` is read as, or None when that kind does not read it."""
        kind, field = cls.__flat__[key]
        return field if (kind is None or kind == name) and field in reads else None

    @classmethod
    def move_flat_keys(cls, data: dict) -> dict:
        """A config file's section with its flat keys moved into the chosen kind's section (one warning each),
        so a command line's override of either spelling wins over the file's (:func:`load_tree`)."""
        data, owner = dict(data), cls._owner()
        name, own, reads = cls._chosen(data)
        if own is None or name not in cls.kinds() or not isinstance(data.get(name, {}), dict):
            return data
        for key in [k for k in data if k in cls.__flat__]:
            field = cls._moved_field(key, name, reads)
            if field is not None:
                data[name] = {**(data.get(name) or {}), field: data.pop(key)}
                _log.warning("%s.%s is now %s.%s.%s (the flat key is still read)", owner, key, owner, name, field)
        return data

    @classmethod
    def fold_options(cls, data: dict) -> dict:
        """``data`` with the chosen kind's section (and the older flat keys it reads) built into ``options``."""
        data, owner = dict(data), cls._owner()
        name, own, reads = cls._chosen(data)
        given: dict = {}
        offered: dict[str, list[tuple[str, Any]]] = {}  # each carried key: (stray section, its value), in order
        for kind in cls.kinds():
            if kind not in data:
                continue
            section = data.pop(kind)
            if kind != name and cls.__strays__ == "ignore":
                theirs = cls.options_class(kind)  # a key its own kind would refuse is not carried either
                both = reads & {f.name for f in dataclasses.fields(theirs)} if theirs is not None else set()
                keep = {k: v for k, v in (section or {}).items() if k in both} if isinstance(section, dict) else {}
                for k, v in keep.items():
                    offered.setdefault(k, []).append((kind, v))
                _log.warning("%s.%s is the section of %s.name=%s, but %s.name=%s; %s", owner, kind, owner, kind,
                             owner, name, f"its {', '.join(sorted(keep))} carried over, the rest ignored" if keep
                             else "ignored")
                continue
            if kind != name:
                raise ConfigError(f"{owner}.{kind} is the section of {owner}.name={kind}, but {owner}.name={name}; "
                                  f"set {owner}.name={kind} or drop {owner}.{kind}")
            if section is not None and not isinstance(section, dict):
                raise ConfigError(f"{owner}.{kind} is a section (set its keys, e.g. {owner}.{kind}.KEY=...), "
                                  f"got {section!r}")
            given = dict(section or {})
        flat = {cls._moved_field(k, name, reads) for k in data if k in cls.__flat__}  # they set the chosen's key too
        for k, offers in offered.items():
            if k not in given and k not in flat and any(v != offers[0][1] for _, v in offers[1:]):
                said = " and ".join(f"{owner}.{kind}.{k}={v!r}" for kind, v in offers)
                raise ConfigError(f"{said} would both carry over to {owner}.name={name}; set {owner}.{name}.{k} "
                                  "(or drop all but one)")
        given = {**{k: offers[-1][1] for k, offers in offered.items()}, **given}
        if "options" in data:
            raise ConfigError(f"{owner}.options: write the kind's section under its name, {owner}.{name}: {{...}}")
        cls._fold_flat(data, given, name, reads)
        if own is not None:
            try:
                data["options"] = from_dict(own, given, f"{owner}.{name}")
            except ConfigError as exc:  # a section shared by several kinds names its keys owner.options.KEY
                raise ConfigError(str(exc).replace(f"{owner}.options.", f"{owner}.{name}.")) from None
        elif given:
            raise ConfigError(f"{owner}.{name} has no settings of its own; drop {owner}.{name}")
        return data

    @classmethod
    def _fold_flat(cls, data: dict, given: dict, name: str, reads: set[str]) -> None:
        owner = cls._owner()
        for key in [k for k in data if k in cls.__flat__]:
            value = data.pop(key)
            kind, key_there = cls.__flat__[key]
            field = cls._moved_field(key, name, reads)
            if field is not None and name not in cls.kinds():
                given[field] = value  # a name outside the registry: its keys stay flat, the only spelling
                continue
            if field is not None:
                if field in given and given[field] != value:
                    _log.warning("%s.%s=%r replaces %s.%s.%s=%r (a flat key is an older config's or the command "
                                 "line's); write %s.%s.%s", owner, key, value, owner, name, field, given[field], owner,
                                 name, field)
                else:
                    _log.warning("%s.%s is now %s.%s.%s (the flat key is still read)", owner, key, owner, name,
                                 field)
                given[field] = value
                continue
            target = kind or "another"
            section = cls.options_class(kind) if kind else None
            default = _default_of(section, key_there) if section is not None else None
            if cls.__strays__ == "ignore" or value == default:
                _log.warning("%s.%s is not read by %s.name=%s; ignored", owner, key, owner, name)
                continue
            raise ConfigError(f"{owner}.{key} (now {owner}.{kind}.{key_there}) is a setting of {owner}.name={target}, "
                              f"but {owner}.name={name}; set {owner}.name={target} or drop {owner}.{key}")

    def __post_init__(self) -> None:
        own = self.options_class(self.name) if isinstance(self.name, str) else None
        if self.options is None and own is not None:
            object.__setattr__(self, "options", own())
        elif own is None and self.options is not None or own is not None and not isinstance(self.options, own):
            want = own.__name__ if own is not None else "None (the kind has no settings)"
            raise ConfigError(f"{self._owner()}.options for {self._owner()}.name={self.name} must be {want}, "
                              f"got {type(self.options).__name__}")
        super().__post_init__()

    def __getattr__(self, key: str):
        flat = type(self).__flat__
        if key in flat:
            kind, field = flat[key]
            options = self.__dict__.get("options")
            chosen = kind is None or kind == self.__dict__.get("name")
            if options is not None and chosen and hasattr(options, field):
                return getattr(options, field)  # an older reader (a user's task factory): the kind's own value
            owner = self._owner()
            where = f"{owner}.{kind or self.__dict__.get('name', 'KIND')}.{field}"
            raise AttributeError(f"{owner}.{key} moved into the kind's own section: read {owner}.options.{field} "
                                 f"({where} in a config file)")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}")


def to_tree(cfg: Any) -> Any:
    """The config dataclass ``cfg`` as the nested plain dict its YAML file holds (a :class:`Kinded`
    section's ``options`` under its kind's name), which :func:`from_dict` reads back to an equal config."""
    if not dataclasses.is_dataclass(cfg):
        return [to_tree(v) for v in cfg] if isinstance(cfg, (list, tuple)) else cfg
    out = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if isinstance(cfg, Kinded) and f.name == "options":
            if value is not None:
                out[cfg.name] = to_tree(value)
            continue
        out[f.name] = to_tree(value)
    return out


def _set(tree: dict, keys: list[str], value: Any, text: str) -> None:
    node = tree
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {text!r}: {key!r} is not a section")
        node = child
    node[keys[-1]] = value


def packaged_configs() -> dict[str, str]:
    """Example configs shipped inside the package (``trajkit/configs/NAME.yaml``): name -> file."""
    from importlib import resources

    folder = resources.files("trajkit") / "configs"
    return {p.name[:-5]: str(p) for p in folder.iterdir() if p.name.endswith(".yaml")}


def config_path(name: str) -> str:
    """A YAML path as given, or the file of the packaged config ``name`` (``trajkit train rep`` works from
    a pip install, without a checkout)."""
    if os.path.exists(name) or name.endswith((".yaml", ".yml")) or os.sep in name:
        return name
    shipped = packaged_configs()
    if name not in shipped:
        raise ConfigError(f"config {name!r}: no such file, and not a packaged config (those are: "
                          f"{', '.join(sorted(shipped))})")
    return shipped[name]


def read_yaml(path: str) -> dict:
    """The mapping in the YAML file ``path``; a :class:`ConfigError` naming the file (and line) otherwise."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            tree = yaml.safe_load(fh) or {}
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"config file {path}:{where}: not valid YAML "
                          f"({getattr(exc, 'problem', None) or exc})") from None
    if not isinstance(tree, dict):
        raise ConfigError(f"config file {path} must hold a mapping of sections")
    return tree


def _move_flat(cls: type, tree: dict) -> dict:
    """``tree`` (for the config class ``cls``) with every :class:`Kinded` section's flat keys in its kind's section."""
    if not isinstance(tree, dict):
        return tree
    if issubclass(cls, Kinded):
        return cls.move_flat_keys(tree)
    types_ = _field_types(cls)
    return {k: _move_flat(types_[k], v) if k in types_ and dataclasses.is_dataclass(types_[k]) else v
            for k, v in tree.items()}


def load_tree(path: str | None, overrides=(), replaced: dict[tuple[str, str], str] | None = None,
              cls: type | None = None) -> dict:
    """YAML file or packaged config name (None: empty) + ``key=value`` overrides -> the nested dict of
    sections. ``replaced``: ``{(section, key): what replaced it}`` for keys of older configs, refused naming
    the new key instead of as unknown. With ``cls`` (the config class the tree is for), the file's flat keys
    of a :class:`Kinded` section move into its kind's section before the overrides apply, so an override in
    either spelling wins over the file."""
    tree: dict = read_yaml(config_path(path)) if path else {}
    if cls is not None:
        tree = _move_flat(cls, tree)
    for text in overrides:
        keys, value = parse_override(text)
        _set(tree, keys, value, text)
    for (section, key), instead in (replaced or {}).items():
        if isinstance(tree.get(section), dict) and key in tree[section]:
            raise ConfigError(f"{section}.{key} was replaced by {instead}")
    return tree


def describe(cfg: Any) -> str:
    """Every key of the config dataclass ``cfg`` as YAML, each section headed by its description and every
    value that differs from the default marked ``# default: ...`` (``trajkit train --print-config``)."""
    import textwrap

    import yaml

    lines: list[str] = []

    def wrap(text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width) or [""]

    def scalar(value) -> str:
        return yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("\n...").strip()

    def emit(obj, ref, indent: str) -> None:
        for f in dataclasses.fields(obj):
            value, base = getattr(obj, f.name), getattr(ref, f.name)
            if dataclasses.is_dataclass(value):
                kinded = isinstance(obj, Kinded) and f.name == "options"
                lines.append("")
                lines.extend(f"{indent}# {line}" for line in wrap(type(value).__doc__ or "", 100 - len(indent)))
                lines.append(f"{indent}{obj.name if kinded else f.name}:")
                emit(value, type(value)() if kinded else base, indent + "  ")
                continue
            if isinstance(obj, Kinded) and f.name == "options":
                continue
            note = "" if value == base else f"  # default: {scalar(base)}"
            lines.append(f"{indent}{f.name}: {scalar(value)}{note}")

    lines.extend(f"# {line}" for line in wrap(type(cfg).__doc__ or "", 100))
    emit(cfg, type(cfg)(), "")
    return "\n".join(lines) + "\n"
