"""The command lines of the READMEs (the project's and experiments/) and docs/ are copy-paste
correct: every ``python -m``, ``torchrun -m``, console-script and ``python script.py`` command
in a fenced code block names a module or script that exists, and each flag, subcommand and
choice is one its argparse parser accepts (required options present unless the line elides
with ``...``). Repository paths it names (``examples/my.yaml``, ``scripts/test.sh``) exist.

The parsers are captured, not run: the module runs as ``__main__`` with ``--help`` and
``ArgumentParser.parse_args`` stopping it, so any argparse command a doc adds is checked
without a list here to keep up to date.
"""

from __future__ import annotations

import argparse
import re
import runpy
import shlex
import sys
import warnings
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "experiments" / "README.md",
        *sorted((ROOT / "docs").glob("*.md"))]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# A wheel's rudder.app is the checkout's app (pyproject's package-dir), and so on.
PACKAGE_DIRS = {k: v for k, v in PYPROJECT["tool"]["setuptools"]["package-dir"].items()
                if k != v}
SCRIPTS = {name: target.split(":")[0] for name, target in PYPROJECT["project"]["scripts"].items()}
REPO_FOLDERS = {"app", "benchmarks", "datasets_scripts", "docs", "examples", "experiments",
                "heuristics", "rudder", "scripts", "tests"}
SEPARATORS = {"&&", "||", ";", "|"}


def code_blocks(path: Path):
    """``(first line number, text)`` of each fenced code block."""
    text = path.read_text(encoding="utf-8")
    for match in re.finditer(r"^```[^\n]*\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
        yield text.count("\n", 0, match.start()) + 2, match.group(1)


def commands(path: Path):
    """``(where, tokens)`` per command of the code blocks (continuations joined, comments and
    ``$`` prompts dropped, ``&&``/``;``/``|`` chains split)."""
    for first, block in code_blocks(path):
        lines = block.split("\n")
        number = 0
        while number < len(lines):
            start, line = number, lines[number]
            while line.rstrip().endswith("\\") and number + 1 < len(lines):
                number += 1
                line = line.rstrip()[:-1] + " " + lines[number]
            number += 1
            line = line.strip().removeprefix("$ ")
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError:
                continue  # not a shell line (output, a table)
            segment, optional = [], False
            for token in [*tokens, ";"]:
                if token in SEPARATORS:
                    if segment:
                        yield f"{path.relative_to(ROOT)}:{first + start}", segment
                    segment = []
                    continue
                if token.startswith("[-"):  # an optional group of the docs: [--method lookup]
                    token, optional = token[1:], True
                if optional and token.endswith("]"):
                    token, optional = token[:-1], False
                segment.append(token)


def target_of(tokens):
    """``("module" | "script", name, args)`` of a command, or None for other programs."""
    while tokens and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", tokens[0]):
        tokens = tokens[1:]  # environment assignments
    if not tokens:
        return None
    program, rest = tokens[0], tokens[1:]
    if program in SCRIPTS:
        return "module", SCRIPTS[program], rest
    if program == "torchrun" and "-m" in rest:
        at = rest.index("-m")
        return "module", rest[at + 1], rest[at + 2:]
    if program in ("python", "python3") and rest:
        if rest[0] == "-m":
            return "module", rest[1], rest[2:]
        if rest[0].endswith(".py"):
            return "script", rest[0], rest[1:]
    if program == "bash" and rest and rest[0].endswith(".sh"):
        return "file", rest[0], rest[1:]
    return None


def checkout_module(name: str) -> str:
    for installed, folder in PACKAGE_DIRS.items():
        if name == installed or name.startswith(installed + "."):
            return folder + name[len(installed):]
    return name


class _Captured(Exception):
    def __init__(self, parser):
        super().__init__(parser.prog)
        self.parser = parser


_PARSERS: dict[tuple[str, str], argparse.ArgumentParser | None] = {}


def parser_of(kind: str, name: str, monkeypatch) -> argparse.ArgumentParser | None:
    """The argparse parser a module or script builds when started (None: it builds none)."""
    key = (kind, name)
    if key not in _PARSERS:
        def capture(self, *args, **kwargs):
            raise _Captured(self)

        with monkeypatch.context() as patch, warnings.catch_warnings():
            # runpy's warning when a module of the package was imported before: harmless here
            warnings.simplefilter("ignore", RuntimeWarning)
            patch.setattr(argparse.ArgumentParser, "parse_args", capture)
            patch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
            patch.setattr(sys, "argv", [name, "--help"])
            patch.setattr(sys, "path", [str(ROOT), *sys.path])
            try:
                if kind == "module":
                    runpy.run_module(name, run_name="__main__", alter_sys=False)
                else:
                    runpy.run_path(str(ROOT / name), run_name="__main__")
                _PARSERS[key] = None
            except _Captured as captured:
                _PARSERS[key] = captured.parser
            except SystemExit:
                _PARSERS[key] = None
    return _PARSERS[key]


def placeholder(value: str) -> bool:
    """A value the reader fills in: RAW, $E/..., <name>, USER/rudder."""
    return bool(re.search(r"[$<{]|^[A-Z][A-Z_]*(/|$)", value)) or value == "..."


def check_choices(action, flag, values, where) -> list[str]:
    """Values (``a|b``: alternatives) outside ``action.choices``, read with its type."""
    problems = []
    for value in (v for given in values for v in given.split("|") if not placeholder(v)):
        try:
            typed = action.type(value) if callable(action.type) else value
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            typed = value
        if typed not in action.choices:
            problems.append(f"{where}: {flag} {value!r} is not one of {sorted(action.choices)}")
    return problems


def check_args(parser: argparse.ArgumentParser, args: list[str], where: str) -> list[str]:
    """Problems of ``args`` against ``parser`` (and the subparser a subcommand picks)."""
    problems, seen = [], set()
    elided = "..." in args
    positionals = [a for a in parser._actions if not a.option_strings]
    at = 0
    while at < len(args):
        token = args[at]
        at += 1
        if token.startswith("-") and token != "-" and not re.fullmatch(r"-\d.*", token):
            flag, has_value, value = token.partition("=")
            action = parser._option_string_actions.get(flag)
            if action is None:
                problems.append(f"{where}: {parser.prog} has no option {flag}")
                continue
            seen.add(action.dest)
            if action.nargs == 0 or has_value:
                values = [value] if has_value else []
            else:
                count = {None: 1, "?": 1}.get(action.nargs, action.nargs)
                values = []
                while at < len(args) and not args[at].startswith("-") and (
                        count in ("*", "+", argparse.REMAINDER) or len(values) < count):
                    values.append(args[at])
                    at += 1
            if action.choices is not None:
                problems += check_choices(action, flag, values, where)
            continue
        sub = next((a for a in positionals if isinstance(a, argparse._SubParsersAction)), None)
        if sub is not None and sub.dest not in seen:
            seen.add(sub.dest)
            if token not in sub.choices:
                problems.append(f"{where}: {parser.prog} has no subcommand {token!r} "
                                f"({', '.join(sub.choices)})")
                return problems
            return problems + check_args(sub.choices[token], args[at:], where)
    if not elided:
        for action in parser._actions:
            if action.required and action.option_strings and action.dest not in seen:
                problems.append(f"{where}: {parser.prog} needs {action.option_strings[0]}")
    return problems


def all_commands():
    return [(where, tokens) for path in DOCS for where, tokens in commands(path)
            if target_of(tokens) is not None]


def test_the_docs_have_commands_to_check():
    found = {target_of(tokens)[1] for _, tokens in all_commands()}
    assert {"rudder.train", "rudder.evaluate", "app", "heuristics", "datasets_scripts",
            "experiments.run"} <= found


@pytest.mark.parametrize("where, tokens", all_commands(), ids=lambda x: str(x)[:60])
def test_command_is_copy_paste_correct(where, tokens, monkeypatch):
    kind, name, args = target_of(tokens)
    if kind == "module":
        name = checkout_module(name)
        if name.split(".")[0] not in REPO_FOLDERS:
            pytest.skip(f"{name} is not this repository's")
    elif not (ROOT / name).is_file():
        pytest.fail(f"{where}: {name} does not exist")
    problems = [f"{where}: {value} does not exist" for value in args
                if value.split("/")[0] in REPO_FOLDERS and "/" in value
                and not placeholder(value) and not (ROOT / value).exists()]
    if kind != "file":
        parser = parser_of(kind, name, monkeypatch)
        if parser is None:
            pytest.skip(f"{name} builds no argparse parser")
        problems += check_args(parser, args, where)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "where, tokens",
    [(w, t) for w, t in all_commands() if checkout_module(target_of(t)[1]) == "rudder.train"],
    ids=lambda x: str(x)[:60],
)
def test_train_commands_resolve_to_a_valid_config(where, tokens, monkeypatch):
    """Their --config file, shorthands and --set overrides make a valid config (nothing runs)."""
    from rudder import train

    monkeypatch.chdir(ROOT)  # --config examples/my.yaml is relative to the checkout
    args = train.build_parser().parse_args(target_of(tokens)[2])
    if not args.resume:
        train.resolve_config(args)
