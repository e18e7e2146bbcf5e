"""``rudder.evaluate --query-langs``: which languages may be asked, which a run was trained on,
and the query-language x training-language table of R@10 it prints."""

from __future__ import annotations

from rudder.errors import RunError
from rudder.languages import SUPPORTED, check_languages


def check_query_langs(langs) -> list[str]:
    """The ``--query-langs`` codes, validated (supported ISO 639-1 codes), duplicates dropped."""
    return list(dict.fromkeys(check_languages(list(langs), where="--query-langs")))


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


def _run_config(path) -> dict:
    """The saved config of the run (directory or checkpoint) at ``path``."""
    from rudder.runs.layout import config_file, find_checkpoint, read_config, run_of_checkpoint
    from rudder.training.checkpoints import load_checkpoint

    checkpoint = find_checkpoint(path)
    run_dir = run_of_checkpoint(checkpoint)
    if config_file(run_dir).is_file():
        return read_config(run_dir)
    return load_checkpoint(checkpoint, map_location="cpu")["config"]


def _published_text_side(path) -> dict:
    from rudder.hub import models as model_hub

    folder = model_hub.resolve(path).path
    return model_hub.read_json_file(folder / model_hub.TEXT_SIDE)


def training_langs(path) -> list[str]:
    """``data.caption_langs`` of the run (directory or checkpoint) at ``path``, or of a
    published model (folder or ``hf://`` id: its ``text_side.json``)."""
    from rudder.hub import models as model_hub

    if model_hub.is_model_reference(path):
        langs = _published_text_side(path).get("caption_langs")
        if not langs:
            raise RunError(f"{path}: its text_side.json has no 'caption_langs'")
        return list(langs)
    return list(_run_config(path)["data"]["caption_langs"])


def text_langs(path) -> list[str]:
    """The languages whose text the run at ``path`` read: its training captions and, for a
    sentence encoder with transforms, the text its statistics were fitted on
    (``data.sentence_fit_langs``, default the training languages, and
    ``data.sentence_fit_text``). A query in any other language is zero-shot."""
    from rudder.hub import models as model_hub

    if model_hub.is_model_reference(path):
        side = _published_text_side(path)
        transforms = side.get("sentence_transforms") or {}
        return sorted(set(side.get("caption_langs") or []) | set(transforms.get("fit_langs")
                                                                  or []))
    data = _run_config(path)["data"]
    langs = set(data["caption_langs"])
    if any(data.get(key) for key in ("sentence_centering", "sentence_whitening",
                                     "sentence_alignment", "sentence_language_removal")):
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
