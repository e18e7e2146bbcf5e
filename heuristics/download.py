"""``python -m heuristics download``: Stanza's official models, all or nothing.

The addresses Stanza downloads from are probed first, as Stanza reads them
(``STANZA_RESOURCES_URL``, default GitHub, for its ``resources.json``; ``STANZA_MODEL_URL``,
default the Hugging Face Hub or ``HF_ENDPOINT``, for the models), each with one HTTP ``HEAD``
through ``requests`` (so ``HTTPS_PROXY``/``NO_PROXY`` apply as they do to the download) and a
short timeout: a machine without a network gets a clear message within seconds. Models are
downloaded into a staging folder beside the target (:func:`rudder.atomic.staged_folder`) and
moved into place only when every language has arrived; an interrupted download leaves nothing.
A language folder holding models trained by ``train-tagger`` is replaced only with
``overwrite``.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from rudder.atomic import staged_folder, swap_into_place
from rudder.hub.offline import offline_setting
from rudder.languages import check_languages
from rudder.optional import require

from .taggers import MODEL_INFO

RESOURCES_URL = "https://raw.githubusercontent.com/stanfordnlp/stanza-resources/main"
HUB_URL = "https://huggingface.co"
PROCESSORS = "tokenize,pos,lemma,depparse"


class DownloadError(RuntimeError):
    """The models could not be fetched; nothing was written."""


def sources() -> list[str]:
    """The origins (``scheme://host/``) Stanza downloads from, by its own settings (module
    docstring)."""
    resources = os.environ.get("STANZA_RESOURCES_URL") or RESOURCES_URL
    models = os.environ.get("STANZA_MODEL_URL", "default")
    if models == "default":
        models = os.environ.get("HF_ENDPOINT") or HUB_URL
    origins = (urlsplit(url) for url in (resources, models))
    return list(dict.fromkeys(f"{u.scheme}://{u.netloc}/" for u in origins))


def probe(url: str, timeout: float) -> None:
    """One HTTP HEAD request to ``url`` (any answer will do); raises OSError when none comes."""
    import requests  # Stanza's own HTTP client; its errors are OSErrors

    requests.head(url, timeout=timeout)


def _offline_hint(model_dir: Path) -> str:
    return (
        "On a machine without a network, train models with "
        "`python -m heuristics train-tagger --lang LANG "
        f"--train X.conllu --dev Y.conllu --model-dir {model_dir}` "
        "or copy a downloaded Stanza resources folder there."
    )


def _refuse_trained(langs, model_dir: Path) -> None:
    trained = [lang for lang in langs if (model_dir / lang / MODEL_INFO).is_file()]
    if trained:
        raise DownloadError(
            f"{model_dir} holds models trained by train-tagger for {', '.join(trained)}; "
            "downloading would replace them. Pass --overwrite to replace them, or another "
            "--model-dir"
        )


def download_models(
    langs, model_dir, timeout: float = 5.0, check=probe, overwrite: bool = False
) -> list[str]:
    """Download tokenize/pos/lemma/depparse models of ``langs`` into ``model_dir``."""
    langs = check_languages(langs, "download --lang")
    model_dir = Path(model_dir)
    if not overwrite:
        _refuse_trained(langs, model_dir)
    if offline_setting():
        raise DownloadError(
            f"HF_HUB_OFFLINE is set, and Stanza's models are on the Hugging Face Hub. "
            f"Unset it to download. {_offline_hint(model_dir)}"
        )
    for url in sources():
        try:
            check(url, timeout)
        except OSError as error:
            raise DownloadError(
                f"cannot reach {url} within {timeout:g} s ({error}); Stanza's models cannot be "
                f"downloaded from here (set HTTPS_PROXY, or STANZA_RESOURCES_URL / HF_ENDPOINT "
                f"for a mirror). {_offline_hint(model_dir)}"
            ) from None
    stanza = require("stanza", "heuristics")

    with staged_folder(model_dir / "download") as stage:
        for lang in langs:
            try:
                stanza.download(
                    lang, model_dir=str(stage), processors=PROCESSORS, logging_level="WARN"
                )
            except Exception as error:  # network errors come from requests and huggingface_hub
                raise DownloadError(
                    f"downloading Stanza's {lang!r} models failed ({error}); nothing was written. "
                    f"{_offline_hint(model_dir)}"
                ) from error
        for lang in langs:
            swap_into_place(stage / lang, model_dir / lang)
        swap_into_place(stage / "resources.json", model_dir / "resources.json")
    return langs
