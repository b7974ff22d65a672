"""One declaration per setting, and one reader for every front end.

A setting is a field of a dataclass declared with `setting(default, help, ...)`: its type is the
field's annotation (bool, int, float, str, a StrEnum for a closed set, `tuple[float, float]` for
an X,Y pair; `X | None` where None is a value: "the runtime chooses", or "off"), and the
declaration says the rest: the values it takes (Bounds keywords), whether a deployment profile sets
it, how text and TOML write None (`none=0`: threads 0 is "OpenVINO chooses"), its command-line flag
where that is not --name-with-dashes, its --help group. Everything else is made from it:

- `Setting.read`: the one reader of a value, from text (a command line, --param, with one boolean
  vocabulary: true/false, yes/no, on/off, 1/0) or from TOML and Python (checked as given);
- `Options`: the base of such a dataclass: `options()` its Settings, `check()` the problems of
  its values, each naming its field; None's spelling read as None when it is made;
- `add_arguments` / `from_args`: argparse flags of a declaration (and of the declarations it
  nests, `section(...)`), and the dataclass from what was parsed;
- `markdown`: its option table for the docs (tests check that the docs hold today's).

Stage parameters (pipeline/stages/base.py: a stage's `Params`), the pipeline's runtime options
(pipeline/spec/values.py: `RuntimeOptions`) and the gaze mouse's options (pipeline/control/options.py)
are declared so. No heavy imports: the CLI builds its parser with it before any model is loaded.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import functools
import importlib
import math
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from pipeline.errors import Problem

KEY, SECTION = "edgegaze.setting", "edgegaze.section"  # dataclass field metadata
TRUE, FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")  # the one boolean vocabulary


class _Unset:
    def __repr__(self) -> str:
        return "unset"


UNSET = _Unset()


@dataclass(frozen=True, kw_only=True)
class Bounds:
    """The values a number may take. above/below: exclusive bounds, low/high: inclusive; None: no bound."""

    above: float | None = None
    below: float | None = None
    low: float | None = None
    high: float | None = None

    def span(self) -> str:
        """The allowed values in words, e.g. 'between 0 and 1' ('' when any value goes)."""
        if self.low is not None and self.high is not None:
            return f"between {self.low:g} and {self.high:g}"
        lo = f"above {self.above:g}" if self.above is not None else f"at least {self.low:g}" if self.low is not None else ""
        hi = f"below {self.below:g}" if self.below is not None else f"at most {self.high:g}" if self.high is not None else ""
        return " and ".join(t for t in (lo, hi) if t)

    def allows(self, value: float) -> bool:
        """A finite number within every bound."""
        return math.isfinite(value) and not self.breaks(value)

    def breaks(self, value: float) -> str:
        """The bound a number breaks, in words ('is below 1', 'must be above 0'); '' for none."""
        for bound, word, broken in ((self.low, "is below", lambda b: value < b), (self.high, "is above", lambda b: value > b),
                                    (self.above, "must be above", lambda b: value <= b),
                                    (self.below, "must be below", lambda b: value >= b)):
            if bound is not None and broken(bound):
                return f"{word} {bound:g}"
        return ""


def boolean(text: str) -> bool:
    """true/false, yes/no, on/off, 1/0 (any case); ValueError for anything else."""
    word = str(text).strip().lower()
    if word in TRUE or word in FALSE:
        return word in TRUE
    raise ValueError(text)


class Refused(ValueError):
    """A value a setting cannot take. str(): what it must be and what it got ('must be a whole number
    at least 1, not 0'); `unread`: text that is not of the setting's type at all ('wide' for a number)."""

    def __init__(self, setting: Setting, given: Any, unread: bool = False, why: str = ""):
        self.setting, self.given, self.unread, self.why = setting, given, unread, why
        super().__init__(why or f"must be {setting.what()}, not {given!r}")

    def on_command_line(self) -> str:
        """As a flag's error says it: "'a' is not a number", '-3 is below 1', '0 must be above 0'."""
        s, text = self.setting, str(self.given)
        if self.why:
            return self.why
        if s.choices:
            return f"'{text}' is not {s.what()}"
        if s.type is tuple:
            return _pair_complaint(s, text)
        try:
            value = float(text)
        except ValueError:
            return f"'{text}' is not {s.kind_word()}"
        if not math.isfinite(value):
            return f"'{text}' is not a finite number"
        return f"{text} {s.breaks(value) or 'must be ' + s.what()}"


def _pair_complaint(s: Setting, text: str) -> str:
    items = text.replace("x", ",").split(",")
    if len(items) > 2:
        return f"'{text}' has {len(items)} values; give X,Y or one value"
    for item in items:
        try:
            value = float(item)
        except ValueError:
            return f"'{item}' is not a number in '{text}'; give X,Y or one value"
        if not Bounds.allows(s, value):
            return f"{item} {s.breaks(value) or 'is not a finite number'} in '{text}'; give X,Y or one value"
    return f"'{text}': give X,Y or one value"


@dataclass(frozen=True, kw_only=True)
class Setting(Bounds):
    """One setting: its default, a one-line help and the values it takes (Bounds, or the members of
    its StrEnum), whether a deployment profile sets it, how text and TOML write None (`none`), and
    its flag. `type`, `optional`, `item`, `choices` and `name` come from the field it declares."""

    default: Any = None
    help: str = ""
    profile: bool = False  # a deployment profile sets it (what the search measures and chooses)
    none: Any = UNSET  # how a command line and TOML write None (threads: 0; the pause key: "")
    flag: str | None = ""  # its command-line flag: "" --name-with-dashes, None: no flag
    group: str = ""  # its group in --help ("" the command's own)
    metavar: str | None = None
    parser: Callable[[str], Any] | None = None  # reads text that no type reads (a targets grid); ValueError(why)
    type: Any = None  # bool, int, float, str, a StrEnum, or tuple (an X,Y pair of `item`)
    item: Any = None
    optional: bool = False  # None is a value
    choices: tuple = ()
    name: str = ""

    def kind_word(self) -> str:
        """'a number', 'a whole number', 'true or false', 'a name', 'X,Y (or one value)'."""
        return {bool: "true or false", int: "a whole number", float: "a number", str: "a name",
                tuple: "X,Y (or one value)"}.get(self.type, f"a {getattr(self.type, '__name__', 'value')}")

    def what(self) -> str:
        """The values it takes in words: 'a whole number at least 1', 'LATENCY or THROUGHPUT'."""
        if self.choices:
            return " or ".join(self.choices)
        word = "a finite number" if self.type is float else self.kind_word()
        return " ".join(filter(None, (word, self.span())))

    def allows(self, value: Any) -> bool:
        """Whether it takes this value, as it is (no text read): of its type, in its bounds or choices."""
        if value is None:
            return self.optional
        if self.choices:
            return isinstance(value, str) and value in self.choices
        if self.type is tuple:
            return isinstance(value, tuple) and len(value) == 2 and all(_number(v) and Bounds.allows(self, v) for v in value)
        if self.type is float:
            return _number(value) and super().allows(value)
        if self.type is int:
            return type(value) is int and super().allows(value)
        if self.type is bool:
            return type(value) is bool
        return isinstance(value, self.type) and (self.type is not str or bool(value.strip()))

    def read(self, value: Any) -> Any:
        """`value` as this setting takes it: text read by its type (its parser, the boolean vocabulary,
        a number, a member by name in any case, 'X,Y' or 'X'), or a TOML or Python value (a whole
        number for a float, a list for a pair); None's spelling is None. Refused where it is not one."""
        given = value
        if isinstance(value, str) and (self.parser or self.type not in (str,)):
            value = self._text(value)
        elif isinstance(value, list) and self.type is tuple:
            value = tuple(value)
        if _number(value) and self.type is float:
            value = float(value)
        elif self.type is tuple and self.item is float and isinstance(value, tuple):
            value = tuple(float(v) if _number(v) else v for v in value)
        if self.spells_none(value):
            return None
        if not self.allows(value):
            raise Refused(self, given)
        return value

    def _text(self, text: str) -> Any:
        try:
            if self.parser:
                return self.parser(text)
            if self.choices:  # a member by its name in any case; else the text, refused below
                return next((self.type(c) for c in self.choices if c.lower() == text.strip().lower()), text)
            if self.type is bool:
                return boolean(text)
            if self.type is tuple:
                items = [float(v) for v in text.replace("x", ",").split(",")]
                return (items[0], items[0]) if len(items) == 1 else tuple(items)
            return self.type(text.strip())
        except ValueError as e:
            if self.parser:
                raise Refused(self, text, unread=True, why=str(e)) from None
            raise Refused(self, text, unread=True) from None

    def spells_none(self, value: Any) -> bool:
        """Whether `value` is how text or TOML write None for it (threads = 0)."""
        return self.none is not UNSET and type(value) is not bool and value == self.none

    def written(self, value: Any) -> Any:
        """The value as TOML writes it: None as its spelling, a member as its name, a pair as a list."""
        if value is None:
            return None if self.none is UNSET else self.none
        if isinstance(value, enum.Enum):
            return value.value
        return list(value) if isinstance(value, tuple) else value

    def flag_name(self, name: str | None = None) -> str | None:
        """Its command-line flag (None: it has none)."""
        if self.flag is None:
            return None
        return self.flag or "--" + (name or self.name).replace("_", "-")


def _number(value: Any) -> bool:
    return type(value) in (int, float)


def setting(default: Any, help: str, **declared) -> Any:
    """A dataclass field that is a setting (Setting's keywords)."""
    return dataclasses.field(default=default, metadata={KEY: Setting(default=default, help=help, **declared)})


def section(cls: type, group: str = "", **defaults: Any) -> Any:
    """A dataclass field that nests another declaration (the mouse's `clicks`): its flags in --help
    `group`; `defaults` where this use of it differs (the mouse waits for its camera forever)."""
    made = functools.partial(cls, **defaults) if defaults else cls
    return dataclasses.field(default_factory=made, metadata={SECTION: group})


def _resolved(annotation: Any) -> tuple[Any, Any, bool]:
    """(type, pair item, optional) of a field's annotation: int, int | None, Hint, tuple[float, float]."""
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        return (*_resolved(rest[0])[:2], True)
    if typing.get_origin(annotation) is tuple:
        return tuple, typing.get_args(annotation)[0], False
    return annotation, None, False


@functools.cache
def declared(cls: type) -> dict[str, Setting]:
    """Field name -> Setting, for the setting fields of dataclass `cls` (not the sections it nests)."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        if KEY in f.metadata:
            kind, item, optional = _resolved(hints[f.name])
            choices = tuple(m.value for m in kind) if isinstance(kind, type) and issubclass(kind, enum.Enum) else ()
            out[f.name] = replace(f.metadata[KEY], name=f.name, type=kind, item=item, optional=optional, choices=choices)
    return out


def sections(cls: type) -> dict[str, tuple[type, str]]:
    """Field name -> (the declaration it nests, its --help group)."""
    hints = typing.get_type_hints(cls)
    return {f.name: (hints[f.name], f.metadata[SECTION]) for f in dataclasses.fields(cls) if SECTION in f.metadata}


class Options:
    """The base of a dataclass of settings: `options()` declares them, `check()` finds the values they
    cannot take (each Problem naming its field, `prefix.name`), and a value written as None's
    spelling (threads=0) is None once made. A value is checked by `check()`, not when made, so that
    every problem of a spec is reported at once."""

    prefix: typing.ClassVar[str] = ""  # its fields' prefix in a Problem ("runtime": runtime.max_faces)

    def __post_init__(self) -> None:
        for name, s in self.options().items():
            if s.spells_none(getattr(self, name)):
                object.__setattr__(self, name, None)

    @classmethod
    def options(cls) -> dict[str, Setting]:
        return declared(cls)

    @classmethod
    def read(cls, name: str, value: Any) -> Any:
        """Option `name`'s value from text or TOML (Setting.read); Refused (a ValueError) says what it must be."""
        return cls.options()[name].read(value)

    @classmethod
    def problem(cls, name: str, value: Any) -> str | None:
        """What is wrong with `value` for option `name` (None: nothing): 'must be a whole number at least 1, not 0'."""
        s = cls.options()[name]
        return None if s.allows(value) or s.spells_none(value) else str(Refused(s, value))

    def check(self) -> list[Problem]:
        """Each option whose value it cannot take, its field `prefix.name`."""
        where = f"{self.prefix}." if self.prefix else ""
        return [Problem(f"{where}{name}", f"{{{where}{name}}} {problem}") for name in self.options()
                if (problem := self.problem(name, getattr(self, name)))]


# -- the command line ---------------------------------------------------------------------------

def _fields(cls: type, path: str = "", group: str = "") -> Iterator[tuple[str, Setting, str]]:
    """(dest, setting, group) of every setting of `cls` and of the sections it nests, in field order."""
    mine, nested = declared(cls), sections(cls)
    for f in dataclasses.fields(cls):
        if f.name in mine:
            yield path + f.name, mine[f.name], mine[f.name].group or group
        elif f.name in nested:
            yield from _fields(nested[f.name][0], f"{path}{f.name}.", nested[f.name][1] or group)


def argument_type(s: Setting) -> Callable[[str], Any]:
    """argparse type: the setting read from text, its error as a flag's ("'a' is not a number")."""
    def read(text: str) -> Any:
        try:
            return s.read(text)
        except Refused as e:
            if s.choices and not e.unread:
                return text  # argparse's own "invalid choice: ... (choose from ...)"
            raise argparse.ArgumentTypeError(e.on_command_line()) from None
    read.__name__ = s.name  # argparse names the type in "invalid <name> value"
    return read


def add_arguments(p: argparse.ArgumentParser, cls: type, leave_out: Iterable[str] = (),
                  required: Iterable[str] = ()) -> None:
    """A flag per setting of `cls` and of its sections (but those left out and those with flag=None),
    each with its help, its default (named in the help), its type and values; booleans as
    --name/--no-name. The parsed value's dest is the field's path (clicks.dwell_s). A setting in
    `required` is a flag the command cannot go without (run's --input): no default."""
    defaults, groups = cls(), {"": p}
    for dest, s, group in _fields(cls):
        name = s.flag_name()
        if name is None or dest in leave_out:
            continue
        if group not in groups:
            groups[group] = p.add_argument_group(group)
        if dest in required:
            option = {"dest": dest, "required": True, "help": _help(s, None)}
        else:
            default = functools.reduce(getattr, dest.split("."), defaults)
            option = {"dest": dest, "default": default, "help": _help(s, default)}
        if s.type is bool:
            option["action"] = argparse.BooleanOptionalAction
        else:
            option.update(type=argument_type(s), metavar=s.metavar or _metavar(s, name))
            if s.choices:
                option.update(choices=list(s.choices), metavar=None)
        groups[group].add_argument(name, **option)


def _metavar(s: Setting, flag: str) -> str:
    return "X,Y" if s.type is tuple else flag.lstrip("-").upper().replace("-", "_")


def _help(s: Setting, default: Any) -> str:
    """The help, with the default where it says something (argparse's %-format escaped)."""
    shown = _shown(s, default)
    text = s.help + (f" (default: {shown})" if shown and s.type is not bool else "")
    return text.replace("%", "%%")


def _shown(s: Setting, value: Any) -> str:
    """A value as a user writes it: 1,1 for a pair, 0 for threads' None; '' where it goes unsaid."""
    if value is None:
        value = s.written(None)
        if value is None:
            return ""
    if isinstance(value, tuple):
        return ",".join(f"{v:g}" for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def from_args(cls: type, args: argparse.Namespace, **others: Any) -> Any:
    """`cls` made of the parsed flags of its settings and of its sections' (a setting without a flag
    keeps its default), and `others` for its other fields."""
    def made(c: type, path: str, extra: dict) -> Any:
        own = {n: getattr(args, path + n) for n in declared(c) if hasattr(args, path + n)}
        inner = {n: made(sub, f"{path}{n}.", {}) for n, (sub, _) in sections(c).items()}
        return c(**own, **inner, **extra)
    return made(cls, "", others)


# -- the docs ------------------------------------------------------------------------------------

def markdown(cls: type, key: Callable[[str, Setting], str] | None = None) -> str:
    """The option table of a declaration for the docs: each setting's flag (or `key(dest, setting)`:
    a stage parameter's name), default, values and help, and whether a deployment profile sets it
    where one of them is."""
    profiles = any(s.profile for _, s, _ in _fields(cls))
    head = ["option", "default", "values", *(["profile"] if profiles else []), "what it does"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    defaults = cls()
    for dest, s, _ in _fields(cls):
        name = key(dest, s) if key else s.flag_name()
        if name is None:
            continue
        default = _shown(s, functools.reduce(getattr, dest.split("."), defaults)) or "-"
        values = " or ".join(f"`{c}`" for c in s.choices) if s.choices else s.metavar or ("see its help" if s.parser else s.what())
        name = f"`{name}`, `--no-{name[2:]}`" if s.type is bool and not key else f"`{name}`"
        cells = [name, default, values, *(["yes" if s.profile else ""] if profiles else []), s.help.replace("|", "/")]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


DOCS_TABLE = re.compile(r"(<!-- options: ([\w.]+):([\w.]+) -->\n)(.*?)(<!-- /options -->)", re.S)


def refresh_tables(text: str) -> str:
    """A docs page with each generated option table (between `<!-- options: module:Class -->` and
    `<!-- /options -->`) made again from its declaration: scripts/options_tables.py writes them,
    tests/unit/test_settings.py checks that the docs hold today's."""
    def table(m: re.Match) -> str:
        cls = functools.reduce(getattr, m.group(3).split("."), importlib.import_module(m.group(2)))
        return f"{m.group(1)}{markdown(cls)}\n{m.group(5)}"
    return DOCS_TABLE.sub(table, text)
