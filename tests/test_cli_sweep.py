"""A sweep over every flag of every command: wrong types and out-of-range values
end in exit code 2 and one ``error:`` line naming the flag (or the file), never a traceback,
and before any work.

The commands are found, not listed: every module of the command packages that defines both
``build_parser()`` and ``main()``, and every subcommand of its parser. So a new command or
flag is swept as soon as it exists:

- a flag with a number type (``rudder.cli.int_in``/``float_in``, or any other converter) gets
  a word, a negative number, 10^23, 1e400 and NaN;
- a flag with choices gets a value outside them;
- a path flag gets a file of binary junk (where a folder, a YAML, CSV, pickle or SQLite file
  is expected), to be refused naming it or the flag (or, for the few listed in
  :data:`REQUIRED_INPUT_FIRST`, the required input the command reads first);
- a free-text flag must be listed in :data:`FREE_TEXT` with how it is validated (and where
  that is tested), so a new one fails here until someone says.

Each command runs in-process (``main(argv)``), in an empty working folder, with the other
required arguments pointing at a folder that does not exist; an alarm fails a case that
starts real work instead of refusing.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
from pathlib import Path

import pytest

from datasets_scripts import BUILDERS

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("rudder", "app", "heuristics", "datasets_scripts", "experiments")
NUMBER_VALUES = ("abc", "-1", "100000000000000000000000", "1e400", "nan")
NO_VALUE = (argparse._HelpAction, argparse._StoreTrueAction, argparse._StoreFalseAction,
            argparse._StoreConstAction, argparse._CountAction, argparse._VersionAction,
            argparse._AppendConstAction)

# Free-text flags (no type to check at parse time): how each is validated, and where.
FREE_TEXT = {
    "rudder.train --set": "KEY=VALUE, every key and value checked by rudder.config.from_dict "
                          "(tests/config/test_config.py)",
    "rudder.train --dataset": "rudder.data.lookup.resolve_dataset: 'sample', a folder or a Hub id",
    "rudder.train --loss": "loss.name, checked by rudder.losses (tests/losses/test_registry.py)",
    "rudder.evaluation.evaluate --dataset": "rudder.data.lookup.resolve_dataset, then the "
                                            "run's experts (tests/test_cli_hardening.py)",
    "app --dataset": "rudder.data.lookup.resolve_dataset",
    "experiments.encoder_alignment --dataset": "rudder.data.lookup.resolve_dataset",
    "experiments.encoder_alignment --encoder": "rudder.text.encoders.encoder_kind: a sentence "
                                               "encoder (tests/experiments/"
                                               "test_encoder_alignment.py)",
    "experiments.encoder_alignment --source": "rudder.languages.check_language "
                                              "(tests/experiments/test_encoder_alignment.py)",
    "experiments.encoder_alignment --fit-langs": "rudder.languages.check_languages, and it "
                                                 "must hold --source (tests/experiments/"
                                                 "test_encoder_alignment.py)",
    "app --host": "handed to the server; a bad address fails when it binds",
    "app --auth": "app.__main__.parse_auth: user:pass, both non-empty (tests/app/test_main.py)",
    "app --annotate": "rudder.data.lookup.resolve_dataset",
    "app --can-retrain": "a login name, checked by app.__main__.retrain_settings "
                         "(tests/app/test_retrain.py)",
    "app --adjudicator": "a login name, checked by app.__main__.retrain_settings "
                         "(tests/app/test_retrain.py)",
    "heuristics download --lang": "rudder.languages.check_language",
    "heuristics train-tagger --lang": "rudder.languages.check_language",
    "heuristics eval-tagger --lang": "rudder.languages.check_language",
    "heuristics tag text": "any text",
    "heuristics tag --lang": "rudder.languages.check_language",
    "heuristics label --langs": "rudder.languages.check_language",
    "heuristics import-relations --annotator": "any name",
    "heuristics import-relations --resolve": "refuse, majority or annotator:NAME, checked by "
                                             "heuristics.relations (tests/heuristics/"
                                             "test_relations.py)",
    "heuristics retrain --dataset": "rudder.data.lookup.resolve_dataset",
    "heuristics retrain --db-dataset": "a dataset name in the app's database; none of its "
                                       "labels is an error (tests/heuristics/test_retrain.py)",
    "heuristics retrain --adjudicator": "any annotator name",
    "heuristics retrain --set": "KEY=VALUE, checked by rudder.config.from_dict",
    **{f"datasets_scripts build {name} --expert-map": "PATTERN=EXPERT, checked by "
       "datasets_scripts.features.read_expert_map" for name in BUILDERS if name != "videos"},
    "datasets_scripts build rudder --visual-expert": "an expert name, checked by "
                                                     "rudder.data.layout.parse_expert",
    "datasets_scripts build charades_sta --clip-lists": "file names inside --src",
    "datasets_scripts build msrvtt --split-lists": "file names inside --src",
    "datasets_scripts publish --repo-id": "USER/NAME, checked by datasets_scripts.publish",
    "rudder.hub.publish --repo-id": "USER/NAME, checked by rudder.publish before staging "
                                "(tests/hub/test_published_models_publish.py)",
    "rudder.hub.publish --revision": "a branch name, checked by "
                                 "rudder.hub.published_models.is_revision "
                                 "(tests/hub/test_published_models.py), then by the Hub",
    "rudder.hub.publish --license": "a licence id written into the card "
                                "(tests/hub/test_published_models_publish.py)",
    "rudder.evaluation.evaluate runs": "run folders, checkpoints, published folders or hf:// ids, "
                            "checked by rudder.evaluation.loading.load_run / "
                            "rudder.hub.published_models.parse_hub_id "
                            "(tests/hub/test_published_models.py)",
    "datasets_scripts build videos --expert": "NAME=ARCH[@hub|@random|@/path], checked by "
                                              "datasets_scripts.video_experts.parse_spec "
                                              "(tests/datasets_scripts/test_videos_experts.py)",
    "datasets_scripts build videos --shard": "K/N, checked by datasets_scripts.videos._shard "
                                             "(tests/datasets_scripts/test_videos_build.py)",
    "rudder.evaluation.evaluate --query-langs": "language codes, checked by rudder.evaluation."
                                     "query_langs.check_query_langs and against the split "
                                     "before any work (tests/evaluation/test_query_langs.py)",
    "rudder.evaluation.evaluate --ensemble": "as rudder.evaluate runs (the --fuse runs)",
    "app --checkpoint": "a run folder, published folder or hf:// id, checked by "
                        "rudder.evaluation.loading.load_run (tests/hub/test_published_models.py)",
    "experiments.run suite": "a suite folder name, checked by experiments.suites.load_suite",
    "experiments.run --dataset": "rudder.data.lookup.resolve_dataset",
    "experiments.tune suite": "a suite folder name, checked by experiments.suites.load_suite",
    "experiments.tune --dataset": "rudder.data.lookup.resolve_dataset",
    "experiments.calibrate suite": "a suite folder name, checked by "
                                   "experiments.suites.load_suite",
    "experiments.calibrate --row": "a row label of the suite, checked against its rows",
    "experiments.calibrate --dataset": "rudder.data.lookup.resolve_dataset",
    **{f"heuristics.studies.{name} --lang": "rudder.languages.check_language(s) "
       "(tests/heuristics/test_studies_cli.py)"
       for name in ("indic_sample", "lemma_eval", "light_verbs_ud")},
}
# Path flags where a file of junk is a valid value (an output file that is replaced).
JUNK_IS_VALID = {
    "heuristics eval-tagger --report": "an output file, replaced atomically",
    "heuristics label --report": "an output file, replaced atomically",
    "heuristics.studies.epic_eval --report": "an output file, replaced atomically",
    "heuristics.studies.ud_eval --report": "an output file, replaced atomically",
    "experiments.encoder_alignment --report": "an output file, replaced atomically",
}


# What a command may create before it refuses a value, and why.
ALLOWED_WRITES = {
    "annotations.sqlite": "the app opens its annotation store (default --db) before loading "
                          "a model, so a bad --db fails fast",
    "annotations.sqlite-wal": "(SQLite's journal of it)",
    "annotations.sqlite-shm": "(SQLite's shared memory of it)",
}


# Path flags whose junk value is not the first input the command finds unusable: it refuses
# its required placeholder input first (still one line naming that file), and why.
REQUIRED_INPUT_FIRST = {
    "heuristics train-tagger --dev": "--train is read first",
    "heuristics tag --cache": "the tag cache opens after the tagger's models are found",
    "heuristics label --cache": "the tag cache opens after the tagger's models are found",
    "heuristics eval-classes --verb-classes": "--sentences is read first",
    "heuristics eval-classes --noun-classes": "--sentences is read first",
    "heuristics import-relations files": "--dataset is opened first (its caption ids)",
    "datasets_scripts translate --cache": "the dataset is opened first",
    **{f"datasets_scripts build {name} --text-features": "--src is read first (the text "
       "features are matched to its captions)" for name in BUILDERS if name != "videos"},
    "datasets_scripts build didemo --lists": "--src is read first",
    "rudder.data.epic_relevance --out": "--epic is read first (the dataset is built before "
                                        "it is written)",
    "heuristics.studies.light_verbs_ud --test": "--train is read first (its constructions "
                                                "are the class map)",
}


def command_modules() -> list[str]:
    """Every module of :data:`PACKAGES` that defines ``build_parser()`` and ``main()``."""
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if "\ndef build_parser(" in text and "\ndef main(" in text:
                found.append(".".join(path.relative_to(REPO).with_suffix("").parts))
    return found


def _name(module: str) -> str:
    return module.removesuffix(".__main__")


def commands():
    """``(command name, module, subcommand path, parser)`` of every command and subcommand."""
    out = []

    def walk(module, path, parser):
        out.append((" ".join([_name(module), *path]), module, path, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                seen = set()
                for name, sub in action.choices.items():
                    if id(sub) not in seen:
                        seen.add(id(sub))
                        walk(module, [*path, name], sub)

    for module in command_modules():
        walk(module, [], importlib.import_module(module).build_parser())
    return out


def _leaf(parser) -> bool:
    return not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def _flag(action) -> str:
    return max(action.option_strings, key=len) if action.option_strings else action.dest


def _kind(action) -> str:
    if action.choices is not None:
        return "choice"
    if action.type in (None, str):
        return "text"
    if action.type is Path or getattr(action.type, "__name__", "") == "folder":
        return "path"
    return "number"


def flag_cases():
    """``(id, command, module, path, parser, action)`` of every flag that takes a value."""
    cases = []
    for name, module, path, parser in commands():
        if not _leaf(parser):
            continue
        for action in parser._actions:
            if isinstance(action, (NO_VALUE, argparse._SubParsersAction)):
                continue
            cases.append((f"{name} {_flag(action)}", name, module, path, parser, action))
    return cases


CASES = flag_cases()


def _placeholders(parser, tested, tmp: Path) -> list[str]:
    """Values for the required arguments other than ``tested``: a folder that does not
    exist, a first choice, or a word."""
    positional, options = [], []
    for action in parser._actions:
        if action is tested or not action.required or isinstance(action, NO_VALUE):
            continue
        if action.choices is not None:
            value = str(next(iter(action.choices)))
        elif _kind(action) == "path":
            value = str(tmp / f"absent-{action.dest}")
        else:
            value = {"suite": "relevance"}.get(action.dest, "en" if "lang" in action.dest else "x")
        if action.option_strings:
            options += [action.option_strings[0], value]
        else:
            positional.append(value)
    return positional, options


def _bad_values(action, junk: Path) -> list[str]:
    kind = _kind(action)
    if kind == "number":
        return list(NUMBER_VALUES)
    if kind == "choice":
        return ["no-such-choice"]
    if kind == "path":
        return [str(junk)]
    return []


class WorkStarted(Exception):
    """Raised by the alarm: the command did not refuse the value in time."""


def run_cli(module: str, argv: list[str], capsys, seconds: int = 30) -> tuple[int | None, str]:
    """``main(argv)`` of ``module`` in this process: (exit code, stderr)."""
    main = importlib.import_module(module).main

    def alarm(signum, frame):
        raise WorkStarted(f"still running after {seconds} s: it did not refuse the value")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        result = main(argv)
        code = result if isinstance(result, int) else 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return code, capsys.readouterr().err


def _names(action) -> set[str]:
    """How an error may name the flag: any of its spellings, or its key."""
    names = set()
    for flag in action.option_strings or [action.dest]:
        bare = flag.lstrip("-")
        names |= {flag, bare.replace("-", "_"), bare.replace("-", ".")}
    return names


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One cache for the module (the sample dataset is built into it once)."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def sandbox(tmp_path, monkeypatch, cache):
    """An empty working folder, an empty Stanza folder, and a file of binary junk."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUDDER_CACHE", str(cache))
    monkeypatch.setenv("STANZA_RESOURCES_DIR", str(cache / "stanza"))
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) + b"\x00\xff" * 64)
    return tmp_path, junk


def test_commands_are_found():
    """The sweep sees every command line of the project (a new one joins by itself)."""
    names = {name for name, *_ in commands()}
    assert {"rudder.train", "rudder.evaluation.evaluate", "rudder.hub.publish",
            "rudder.data.sample", "app", "heuristics label",
            "heuristics import-relations", "heuristics video-relations",
            "datasets_scripts translate", "datasets_scripts build rudder",
            "datasets_scripts publish", "datasets_scripts demo-videos", "experiments.run",
            "experiments.tune"} <= names
    assert len(CASES) > 100
    assert "datasets_scripts build videos --engine" in {case[0] for case in CASES}


@pytest.mark.parametrize("name", [name for name, _, _, parser in commands() if _leaf(parser)])
def test_every_parser_gives_one_line_usage_errors(name, sandbox, capsys):
    module, path, parser = next((m, p, q) for n, m, p, q in commands() if n == name)
    positional, options = _placeholders(parser, None, sandbox[0])
    code, err = run_cli(module, [*path, *positional, *options, "--no-such-flag"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "--no-such-flag" in lines[0]


def test_every_free_text_flag_says_how_it_is_checked():
    """A new flag that takes free text must be added to FREE_TEXT with how it is validated."""
    text = {case_id for case_id, _, _, _, _, action in CASES if _kind(action) == "text"}
    assert text - set(FREE_TEXT) == set(), "flags without a validation note"
    assert set(FREE_TEXT) - text == set(), "notes of flags that no longer exist"


@pytest.mark.parametrize("case", [c for c in CASES if _kind(c[5]) != "text"], ids=lambda c: c[0])
def test_a_bad_value_is_one_error_line_naming_the_flag(case, sandbox, capsys):
    case_id, _, module, path, parser, action = case
    if case_id in JUNK_IS_VALID:
        pytest.skip(JUNK_IS_VALID[case_id])
    tmp, junk = sandbox
    positional, options = _placeholders(parser, action, tmp)
    flag = _flag(action)
    for value in _bad_values(action, junk):
        given = [flag, value] if action.option_strings else [value]
        if not action.option_strings and action.nargs in ("+", "*"):
            given = [value]
        argv = [*path, *positional, *given, *options] if not action.option_strings \
            else [*path, *positional, *options, *given]
        code, err = run_cli(module, argv, capsys)
        lines = err.strip().splitlines()
        shown = f"{case_id} {value!r}: exit {code}, stderr:\n{err[-1500:]}"
        assert "Traceback" not in err, shown
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), shown
        # Refused naming the flag or the file, unless a required input is checked first
        # (REQUIRED_INPUT_FIRST: then that input's file is named).
        named = _names(action) | {value}
        if case_id in REQUIRED_INPUT_FIRST:
            named = {str(tmp), str(Path(os.environ["RUDDER_CACHE"]))}
        assert any(n in lines[0] for n in named), f"flag or file not named: {shown}"
    written = sorted(set(os.listdir(tmp)) - {"junk.bin"} - set(ALLOWED_WRITES))
    assert written == [], f"{case_id}: wrote {written} before refusing"
