"""``python -m heuristics download``: Stanza's official models, all or nothing.

The hosts Stanza downloads from (its ``resources.json`` on GitHub, the models on the
Hugging Face Hub) are probed first with a short timeout, so a machine without a network
gets a clear message within seconds. Models are downloaded into a staging folder beside
the target (:func:`rudder.atomic.staged_folder`) and moved into place only when every
language has arrived; an interrupted download leaves nothing.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from rudder.atomic import staged_folder, swap_into_place
from rudder.languages import check_languages
from rudder.optional import require

HOSTS = ("raw.githubusercontent.com", "huggingface.co")
PROCESSORS = "tokenize,pos,lemma,depparse"


class DownloadError(RuntimeError):
    """The models could not be fetched; nothing was written."""


def probe(host: str, timeout: float) -> None:
    """Open (and close) a TCP connection to ``host:443``; raises OSError when unreachable."""
    with socket.create_connection((host, 443), timeout=timeout):
        pass


def _offline_hint(model_dir: Path) -> str:
    return (
        "On a machine without a network, train models with "
        "`python -m heuristics train-tagger --lang LANG "
        f"--train X.conllu --dev Y.conllu --model-dir {model_dir}` "
        "or copy a downloaded Stanza resources folder there."
    )


def download_models(langs, model_dir, timeout: float = 5.0, check=probe) -> list[str]:
    """Download tokenize/pos/lemma/depparse models of ``langs`` into ``model_dir``."""
    langs = check_languages(langs, "download --lang")
    model_dir = Path(model_dir)
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False"):
        raise DownloadError(
            f"HF_HUB_OFFLINE is set, and Stanza's models are on the Hugging Face Hub. "
            f"Unset it to download. {_offline_hint(model_dir)}"
        )
    for host in HOSTS:
        try:
            check(host, timeout)
        except OSError as error:
            raise DownloadError(
                f"cannot reach {host} within {timeout:g} s ({error}); Stanza's models cannot be "
                f"downloaded from here. {_offline_hint(model_dir)}"
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
