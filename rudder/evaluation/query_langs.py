"""``rudder.evaluate --query-langs``: which languages may be asked, which a run was trained on,
and the query-language x training-language table of R@10 it prints."""

from __future__ import annotations

from rudder.errors import RunError
from rudder.languages import SUPPORTED, check_languages


def check_query_langs(langs) -> list[str]:
    """The ``--query-langs`` codes, validated (supported ISO 639-1 codes, written as
    :data:`rudder.languages.SUPPORTED` writes them: lower case), duplicates dropped. A code
    in another case or a comma-separated list is refused with the spelling to use."""
    for code in langs:
        if not code.strip():
            raise RunError("--query-langs: an empty language code; give supported codes "
                           f"separated by spaces ({' '.join(SUPPORTED)})")
        parts = [part.strip() for part in code.split(",") if part.strip()]
        if len(parts) > 1 and all(part.lower() in SUPPORTED for part in parts):
            raise RunError(f"--query-langs {code!r}: separate languages with spaces: "
                           f"--query-langs {' '.join(part.lower() for part in parts)}")
        if code not in SUPPORTED and code.strip().lower() in SUPPORTED:
            raise RunError(f"--query-langs {code!r}: language codes are lower case: "
                           f"--query-langs {code.strip().lower()}")
    return list(dict.fromkeys(check_languages(list(langs), where="--query-langs")))


def check_split_has(path, langs: list[str], split: str, dataset: str | None = None) -> None:
    """Refuse ``--query-langs`` languages that the ``split`` of the dataset the run at
    ``path`` is evaluated on (``dataset``, default the run's own) has no caption in; reads
    only the split's caption languages, before any model is loaded."""
    from rudder.data.lookup import resolve_dataset

    spec = dataset or run_data_config(path).get("dataset")
    folder = resolve_dataset(str(spec))
    found = set(folder.captions(split, columns=["lang"]).column("lang").to_pylist())
    missing = [lang for lang in langs if lang not in found]
    if missing:
        have = ", ".join(lang for lang in SUPPORTED if lang in found) or "none"
        raise RunError(f"--query-langs: the {split} split of {folder.root} has no caption in "
                       f"{missing} (it has: {have}); drop them or pass --dataset with a "
                       "dataset that has them")


def check_pivots(pivots: int, text_encoder, flag: str = "--sentence-pivots") -> int:
    """``--sentence-pivots`` / ``--sentence-alignment``: an integer >= 0, for a run with a
    sentence encoder."""
    from rudder.text.encoders import encoder_kind

    if pivots < 0:
        raise RunError(f"{flag}: expected an integer >= 0, got {pivots}")
    if pivots and encoder_kind(text_encoder) != "sentence":
        raise RunError(f"{flag} needs a run with a sentence encoder "
                       f"(data.text_encoder: multilingual-e5 or sentence:FOLDER), not "
                       f"{text_encoder!r}")
    return pivots


def _published_text_side(path) -> dict:
    from rudder.hub import published_models

    folder = published_models.resolve(path).path
    return published_models.read_json_file(folder / published_models.TEXT_SIDE)


def training_langs(path) -> list[str]:
    """``data.caption_langs`` of the run (directory or checkpoint) at ``path``, or of a
    published model (folder or ``hf://`` id: its ``text_side.json``)."""
    from rudder.hub import published_models

    if published_models.is_model_reference(path):
        langs = _published_text_side(path).get("caption_langs")
        if not langs:
            raise RunError(f"{path}: its text_side.json has no 'caption_langs'")
        return list(langs)
    return list(run_data_config(path)["caption_langs"])


def run_data_config(path) -> dict:
    """The ``data`` section of the config of the run, checkpoint or published model at
    ``path`` (read from its config file; a checkpoint without a run folder: its own)."""
    from rudder.config import load_yaml
    from rudder.hub import published_models
    from rudder.runs.checkpoints import load_checkpoint
    from rudder.runs.layout import config_file, find_checkpoint, read_config, run_of_checkpoint

    if published_models.is_model_reference(path):
        config = load_yaml(published_models.resolve(path).path / published_models.CONFIG)
    else:
        checkpoint = find_checkpoint(path)
        run_dir = run_of_checkpoint(checkpoint)
        if config_file(run_dir).is_file():
            config = read_config(run_dir)
        else:
            config = load_checkpoint(checkpoint, map_location="cpu")["config"]
    data = config.get("data") if isinstance(config, dict) else None
    if not isinstance(data, dict):
        raise RunError(f"{path}: its config has no 'data' section")
    return data


def text_langs(path) -> list[str]:
    """The languages whose text the run at ``path`` read: its training captions and, for a
    sentence encoder with transforms, the text its statistics were fitted on
    (``data.sentence_fit_langs``, default the training languages, and
    ``data.sentence_fit_text``). A query in any other language is zero-shot."""
    from rudder.hub import published_models

    if published_models.is_model_reference(path):
        side = _published_text_side(path)
        transforms = side.get("sentence_transforms") or {}
        return sorted(set(side.get("caption_langs") or []) | set(transforms.get("fit_langs")
                                                                  or []))
    return langs_read(run_data_config(path))


SENTENCE_TRANSFORMS = ("sentence_centering", "sentence_whitening", "sentence_alignment",
                       "sentence_language_removal",
                       "sentence_pivot_nullspace",
                       "sentence_input_nullspace")  # data fields that fit statistics on text


def langs_read(data: dict) -> list[str]:
    """:func:`text_langs` of a run's ``data`` config section (a dict)."""
    langs = set(data["caption_langs"])
    if any(data.get(key) for key in SENTENCE_TRANSFORMS):
        langs |= set(data.get("sentence_fit_langs") or [])
        langs |= set(data.get("sentence_fit_text") or {})
    return sorted(langs)


def transfer_table(summaries: dict, metric: str = "R10") -> str:
    """Markdown table: one row per query language, one column per run (headed by its
    training languages), cells the t2v ``metric`` of that language's queries; ``*`` marks a
    language the run was trained on, ``ZS`` one whose text it read nowhere (zero-shot, from
    a summary's ``zero_shot_langs``), ``(x0.NN)`` the ratio to the mean over the trained
    languages."""
    runs = [(name, s) for name, s in summaries.items() if "per_language" in s]
    langs = sorted({lang for _, s in runs for lang in s["per_language"]},
                   key=lambda c: SUPPORTED.index(c) if c in SUPPORTED else len(SUPPORTED))
    heads = [f"{'+'.join(s['training_langs'])} ({name.rstrip('/').rsplit('/', 1)[-1]})"
             for name, s in runs]
    lines = [(f"t2v {metric} by query language (rows) and training languages (columns; "
              "* = trained on it, ZS = no text of it read anywhere: zero-shot; ratio to the "
              "mean over the trained languages)"), "",
             "| query | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for lang in langs:
        cells = []
        for _, s in runs:
            per = s["per_language"]
            trained = [per[t][metric] for t in s["training_langs"] if t in per]
            if lang not in per:
                cells.append("-")
                continue
            value = per[lang][metric]
            ratio = f" (x{value / (sum(trained) / len(trained)):.2f})" if trained and sum(
                trained) > 0 else ""
            mark = ("*" if lang in s["training_langs"] else
                    " ZS" if lang in s.get("zero_shot_langs", ()) else "")
            cells.append(f"{value:.1f}{mark}{ratio}")
        lines.append(f"| {lang} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
