"""Finding a dataset folder from what a user types: ``sample``, a local path or a Hub
dataset id (downloaded once into the Hugging Face cache)."""

from __future__ import annotations

import os
from pathlib import Path

from rudder.data.layout import DatasetFolder
from rudder.errors import RunError


def resolve_dataset(spec: str) -> DatasetFolder:
    """A dataset folder from ``sample``, a local path or a Hub repo id (downloaded once)."""
    if spec == "sample":
        from rudder.data.sample import sample_dataset_path

        return DatasetFolder(sample_dataset_path())
    path = Path(spec).expanduser()
    if path.exists():
        return DatasetFolder(path)
    if spec.count("/") == 1 and not spec.startswith((".", "/")):
        return DatasetFolder(_download_from_hub(spec))
    raise RunError(f"dataset {spec!r} is neither 'sample', an existing folder nor a Hub repo id")


def _download_from_hub(repo_id: str) -> Path:
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "5")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "10")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, repo_type="dataset"))
    except Exception as error:  # noqa: BLE001 -- offline errors come in many types
        raise RunError(
            f"could not fetch dataset {repo_id!r} from the Hugging Face Hub "
            f"({type(error).__name__}: {error}); with no network, build it locally with "
            "`python -m datasets_scripts build` and pass the folder"
        ) from None
