"""``python -m datasets_scripts publish OUT --repo-id USER/NAME``: upload a built folder to the Hub.

The card is validated first (YAML front matter parses, a ``configs:`` list whose every
``path`` exists, every parquet file listed by some config and readable, with the row count
the card states, licence set). ``--dry-run``
stops there and lists the files and sizes. Otherwise, in this order, each failing fast with
a clear message: ``HF_HUB_OFFLINE``, a token (``HF_TOKEN`` or the ``hf auth login`` cache),
an answer from the endpoint within ``timeout`` seconds; then
``HfApi.create_repo(repo_type="dataset", exist_ok=True)`` and ``HfApi.upload_folder``.

Every request goes through huggingface_hub's own HTTP session, so its proxies
(``HTTPS_PROXY``), ``HF_ENDPOINT`` and certificates apply to the check too. That session
waits forever by default; here its timeouts are finite (``timeout`` to connect,
``transfer_timeout`` per read or write), and a connection lost during the upload is a
:class:`PublishError` that says a rerun resumes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from rudder.data.layout import DatasetFolder
from rudder.hub.offline import bounded_session, hub_offline

from .cards import local_paths

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
IGNORED = (".*", "*.tmp", "*/.*")


class PublishError(RuntimeError):
    """The folder, the card, the token or the network is not ready for an upload."""


def card_front_matter(root: Path) -> dict:
    """The README's YAML front matter (between the first two ``---`` lines)."""
    path = root / "README.md"
    if not path.is_file():
        raise PublishError(f"{path} is missing: every dataset needs a card (rebuild the folder)")
    text = path.read_text(encoding="utf-8")
    match = re.match(r"^---\n(.*?)\n---\n", text, re.DOTALL)
    if not match:
        raise PublishError(f"{path}: no YAML front matter (a block between '---' lines at the top)")
    try:
        front = yaml.safe_load(match.group(1))
    except yaml.YAMLError as error:
        raise PublishError(f"{path}: the YAML front matter does not parse ({error})") from error
    if not isinstance(front, dict):
        raise PublishError(f"{path}: the front matter is not a YAML mapping")
    return front


def _entry_files(root: Path, card: Path, name: str, entry) -> set[str]:
    """The files one ``data_files`` entry names: its ``path``, a path or glob pattern or a
    list of them, each matching at least one file of ``root``."""
    paths = entry.get("path") if isinstance(entry, dict) else None
    paths = [paths] if isinstance(paths, str) else paths
    if not paths or not all(isinstance(p, str) and p for p in paths):
        raise PublishError(f"{card}: config {name!r} has a data_files entry {entry!r} without "
                           "a path (use {split: ..., path: FILE})")
    found = set()
    for pattern in paths:
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise PublishError(f"{card}: config {name!r} lists {pattern!r}; data_files paths "
                               "are relative to the folder, inside it")
        matches = {p.relative_to(root).as_posix() for p in root.glob(pattern) if p.is_file()}
        if not matches:
            raise PublishError(f"{card}: config {name!r} lists {pattern!r}, which is not in {root}")
        found |= matches
    return found


def validate_card(root: Path) -> list[str]:
    """Check the card against the folder; returns the config names."""
    front = card_front_matter(root)
    card = root / "README.md"
    configs = front.get("configs")
    if not isinstance(configs, list) or not configs:
        raise PublishError(f"{card}: no 'configs:' list in the front matter")
    listed, names = set(), []
    for config in configs:
        name = config.get("config_name") if isinstance(config, dict) else None
        files = config.get("data_files") if isinstance(config, dict) else None
        if not name or not isinstance(files, list):
            raise PublishError(f"{card}: config {config!r} needs config_name and data_files")
        if not files:
            raise PublishError(
                f"{card}: config {name!r} has no data_files (datasets cannot load an empty "
                "config); rebuild the folder, or remove the config from the card"
            )
        names.append(name)
        for entry in files:
            listed |= _entry_files(root, card, name, entry)
    stray = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*.parquet")
        if p.relative_to(root).as_posix() not in listed
    )
    if stray:
        raise PublishError(f"{root}: parquet file(s) no config lists: {stray}; rebuild the folder")
    if not front.get("license"):
        raise PublishError(f"{card}: no 'license:' in the front matter")
    check_parquet_files(root, sorted(p for p in listed if p.endswith(".parquet")))
    return names


CONTENTS_ROW = re.compile(r"^\| (\S+) \| (\S+) \| (\d+) \|$", re.MULTILINE)


def check_parquet_files(root: Path, relatives: list[str]) -> None:
    """Read every listed parquet file's footer (a truncated or damaged file has none) and
    compare its row count with the card's ``## Contents`` table, where the card has one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rudder.data.card import config_path

    text = (root / "README.md").read_text(encoding="utf-8")
    stated = {config_path(c, s): int(n) for c, s, n in CONTENTS_ROW.findall(text)}
    for relative in relatives:
        try:
            rows = pq.ParquetFile(root / relative).metadata.num_rows
        except (pa.ArrowException, OSError) as error:
            raise PublishError(
                f"{root / relative}: not a readable parquet file ({error}); it is truncated or "
                "damaged: rebuild the folder (or copy the file again)"
            ) from None
        if relative in stated and stated[relative] != rows:
            raise PublishError(
                f"{root / relative}: holds {rows} rows, but the card says {stated[relative]}; "
                "the file was changed or replaced after the build: rebuild the folder"
            )


def sharing_warnings(folder: DatasetFolder) -> list[str]:
    """What to know before sharing a built folder: experts with random weights (``build
    videos --expert NAME=ARCH@random``), and local paths its recorded build command holds
    (folders built before commands were recorded without them)."""
    extra = folder.meta.extra if isinstance(folder.meta.extra, dict) else {}
    experts = extra.get("experts")
    if not isinstance(experts, dict):
        experts = {}
    warnings = [
        f"expert {name} ({record.get('spec', name)}) has RANDOM weights: its features only "
        "check the pipeline and say nothing about the videos; rebuild with trained weights "
        "(@hub or @/path/to/weights) before sharing"
        for name, record in sorted(experts.items())
        if isinstance(record, dict) and str(record.get("weights", "")).startswith("random")]
    paths = local_paths(str(extra.get("command", "")))
    if paths:
        warnings.append(
            f"the build command in README.md and rudder.json names local paths ({paths[0]}"
            f"{f' and {len(paths) - 1} more' if len(paths) > 1 else ''}) that the upload "
            "would publish; edit them out of both files first (a new build records names only)")
    return warnings


def list_files(root: Path) -> list[tuple[str, int]]:
    """The files an upload sends (hidden and temporary files left out), with sizes."""
    files = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if (
            path.is_file()
            and not any(part.startswith(".") for part in relative.split("/"))
            and not relative.endswith(".tmp")
        ):
            files.append((relative, path.stat().st_size))
    return files


def check_reachable(endpoint: str, timeout: float) -> None:
    """A HEAD request to the Hub endpoint through huggingface_hub's session (its proxies and
    certificates), answered within ``timeout`` seconds, so a missing network fails fast."""
    import httpx2
    from huggingface_hub import get_session

    try:
        get_session().head(endpoint, timeout=timeout)
    except (httpx2.HTTPError, OSError) as error:
        raise PublishError(
            f"cannot reach {endpoint} ({type(error).__name__}: {error}); check the network "
            "(and HTTPS_PROXY / HF_ENDPOINT), or use --dry-run to validate the folder offline"
        ) from error


def publish(
    root,
    repo_id: str,
    *,
    private: bool = False,
    dry_run: bool = False,
    token: str | None = None,
    timeout: float = 5.0,
    transfer_timeout: float = 120.0,
    stream=None,
) -> list[tuple[str, int]]:
    """Validate ``root`` and upload it as the dataset repo ``repo_id``; returns the file list.

    ``timeout``: seconds to connect to the Hub; ``transfer_timeout``: seconds any read or
    write of a request may wait."""
    stream = stream or sys.stdout
    root = Path(root)
    if not REPO_ID.match(repo_id):
        raise PublishError(f"--repo-id {repo_id!r}: use USER/NAME (letters, digits, '-', '_', '.')")
    folder = DatasetFolder(root)  # a rudder dataset (rudder.json present and valid)
    configs = validate_card(root)
    folder.check_splits_agree()
    for warning in sharing_warnings(folder):
        print(f"WARNING: {warning}", file=sys.stderr)
    files = list_files(root)
    total = sum(size for _, size in files)
    if dry_run:
        for relative, size in files:
            print(f"{size:>14,d}  {relative}", file=stream)
        print(
            f"{len(files)} files, {total:,d} bytes; card OK ({len(configs)} configs: "
            f"{', '.join(configs)}); would upload to datasets/{repo_id}"
            f"{' (private)' if private else ''}",
            file=stream,
        )
        return files
    if hub_offline():
        raise PublishError(
            "HF_HUB_OFFLINE is set: the Hub cannot be reached in offline mode; unset it "
            "to upload, or use --dry-run"
        )
    import httpx2
    from huggingface_hub import HfApi, constants, get_token
    from huggingface_hub.errors import HfHubHTTPError

    token = token or get_token()
    if not token:
        raise PublishError(
            "no Hugging Face token: set HF_TOKEN or run `hf auth login` (a token with "
            "write access), or use --dry-run"
        )
    endpoint = constants.ENDPOINT
    check_reachable(endpoint, timeout)
    api = HfApi(endpoint=endpoint, token=token)
    try:
        with bounded_session(timeout, transfer_timeout):
            url = api.create_repo(
                repo_id, repo_type="dataset", private=private, exist_ok=True, token=token
            )
            api.upload_folder(
                repo_id=repo_id,
                folder_path=str(root),
                repo_type="dataset",
                token=token,
                commit_message=f"Upload {root.name} (rudder datasets_scripts)",
                ignore_patterns=list(IGNORED),
            )
    except HfHubHTTPError as error:
        status = getattr(getattr(error, "response", None), "status_code", None)
        hint = " (the token lacks write access to this namespace)" if status in (401, 403) else ""
        raise PublishError(f"the Hub refused the upload to {repo_id}: {error}{hint}") from error
    except (httpx2.HTTPError, OSError) as error:
        raise PublishError(
            f"lost the connection to {endpoint} while uploading to {repo_id} "
            f"({type(error).__name__}: {error}); check the network and rerun the command: it "
            "resumes (an existing repo is kept, files already uploaded are not sent again)"
        ) from error
    print(f"uploaded {len(files)} files ({total:,d} bytes) to {url}", file=stream)
    return files
