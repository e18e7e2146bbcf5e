"""``python -m rudder.publish RUN --repo-id USER/NAME``: upload a trained run as a Hub model.

The run's selected checkpoint (``best.pt``, the one its ``metrics.json`` describes) is
staged as :mod:`rudder.hub.published_models`'s files (``model.safetensors``, ``config.yaml``,
``model.json``, ``text_side.json``, ``metrics.json``, ``env.json``, the card ``README.md``;
:mod:`rudder.hub.model_card`) and validated: the card's front matter parses and the model is
rebuilt from the staged files alone (safetensors loaded strictly). ``--dry-run`` stops
there and lists the files; ``--stage DIR`` keeps them in DIR (a folder ``rudder.evaluate``
and the app load like a Hub id). Otherwise, each failing fast with a clear message:
``HF_HUB_OFFLINE``, a token, ``HfApi.whoami`` answered within ``--timeout`` seconds, then
``HfApi.create_repo(exist_ok=True)``, ``create_branch`` for ``--revision``, and
``HfApi.upload_folder``. The printed ``hf://USER/NAME@<commit>`` pins the upload.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from rudder.atomic import staged_folder, swap_into_place
from rudder.cli import ArgumentParser, float_in, folder
from rudder.errors import RunError, exit_on_error
from rudder.hub import published_models
from rudder.hub.offline import bounded_session, hub_offline


class PublishError(RunError):
    """The run, the token or the network is not ready for an upload."""


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m rudder.publish",
        description="Upload a trained run's selected checkpoint, config, text side, metrics "
                    "and model card to the Hugging Face Hub.")
    parser.add_argument("run", type=folder, help="a training run directory (one seed)")
    parser.add_argument("--repo-id", required=True, help="the model repository, USER/NAME")
    parser.add_argument("--private", action="store_true", help="create the repository private")
    parser.add_argument("--revision", help="upload to this branch (created if missing; "
                        "default: main)")
    parser.add_argument("--license", help="licence of the weights (default: the training "
                        "dataset card's)")
    parser.add_argument("--dry-run", action="store_true",
                        help="validate and list the files offline; upload nothing")
    parser.add_argument("--stage", type=folder, metavar="DIR",
                        help="write the files into DIR (new or empty) and keep them")
    parser.add_argument("--timeout", type=float_in(0, 600, low_open=True), default=5.0,
                        help="seconds to connect to the Hub (default 5)")
    return parser


def stage_files(run: Path, out: Path, repo_id: str, license: str | None = None
                ) -> list[tuple[str, int]]:
    """Write and validate the published files of ``run`` in ``out``; ``(name, size)`` each."""
    from rudder.hub import model_card

    names = model_card.stage(run, out, repo_id, license)
    front = model_card.card_front_matter((out / published_models.CARD).read_text(encoding="utf-8"))
    if front.get("library_name") != "rudder" or not front.get("license"):
        raise PublishError(f"{out / published_models.CARD}: the card needs library_name: rudder "
                           "and a license")
    published_models.rebuild(out)  # the staged files alone rebuild the model
    return [(name, (out / name).stat().st_size) for name in names]


def hub_token() -> str:
    """The Hugging Face token huggingface_hub would use (``HF_TOKEN``, ``hf auth login``)."""
    from huggingface_hub import get_token

    token = get_token()
    if not token:
        raise PublishError("no Hugging Face token: set HF_TOKEN or run `hf auth login` (a "
                           "token with write access), or use --dry-run")
    return token


def upload(folder: Path, repo_id: str, *, private: bool = False, revision: str | None = None,
           token: str | None = None, timeout: float = 5.0, transfer_timeout: float = 300.0,
           ) -> str:
    """Upload ``folder`` as model repo ``repo_id`` through ``HfApi``; returns the commit sha."""
    if hub_offline():
        raise PublishError("HF_HUB_OFFLINE is set: nothing can be uploaded in offline mode; "
                           "unset it, or use --dry-run")
    import httpx2
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import HfHubHTTPError

    token = token or hub_token()
    api = HfApi(endpoint=constants.ENDPOINT, token=token)
    step = ("accept the token", f"reach {constants.ENDPOINT}")  # (refused, failed) wording
    try:
        with bounded_session(timeout, transfer_timeout):
            api.whoami()
            step = (f"take the upload to {repo_id}", f"upload to {repo_id}")
            api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
            if revision:
                api.create_branch(repo_id, branch=revision, repo_type="model", exist_ok=True)
            commit = api.upload_folder(
                repo_id=repo_id, folder_path=str(folder), repo_type="model", revision=revision,
                commit_message="Upload a rudder model (python -m rudder.publish)",
                allow_patterns=list(published_models.MODEL_FILES))
    except HfHubHTTPError as error:
        status = getattr(getattr(error, "response", None), "status_code", None)
        hints: dict[int | None, str] = {401: " (the token is not valid)",
                                        403: " (the token lacks write access there)"}
        hint = hints.get(status, "")
        reason = published_models._first_line(error)
        raise PublishError(f"the Hub refused to {step[0]}: {reason}{hint}") from None
    except (httpx2.HTTPError, OSError) as error:  # connection failures
        raise PublishError(f"could not {step[1]} ({type(error).__name__}: {error}); check the "
                           "network (HTTPS_PROXY, HF_ENDPOINT) and rerun: an existing repo is "
                           "kept, uploaded files are not sent again") from None
    return str(getattr(commit, "oid", "") or "")


def publish(run, repo_id: str, *, private=False, dry_run=False, revision=None, license=None,
            stage_dir: Path | None = None, timeout: float = 5.0, stream=None
            ) -> list[tuple[str, int]]:
    """Stage, validate and (unless ``dry_run``) upload ``run``; returns the files."""
    stream = stream or sys.stdout
    if not published_models.REPO_ID.match(repo_id):
        raise PublishError(f"--repo-id {repo_id!r}: use USER/NAME (letters, digits, '-', '_', "
                           "'.')")
    if revision is not None and not published_models.is_revision(revision):
        raise PublishError(f"--revision {revision!r}: use a branch name (letters, digits, "
                           "'-', '_', '.', joined by '/'; no component empty or starting "
                           "with '.')")
    if stage_dir is not None and stage_dir.exists() and (
            not stage_dir.is_dir() or any(stage_dir.iterdir())):
        raise PublishError(f"--stage {stage_dir} exists and is not an empty folder")
    if not dry_run and hub_offline():  # before the staging work
        raise PublishError("HF_HUB_OFFLINE is set: nothing can be uploaded in offline mode; "
                           "unset it, or use --dry-run")
    token = None if dry_run else hub_token()  # before the staging work too
    work = Path(tempfile.mkdtemp(prefix="rudder-publish-"))
    try:
        files = stage_files(Path(run), work, repo_id, license)
        total = sum(size for _, size in files)
        for name, size in files:
            print(f"{size:>14,d}  {name}", file=stream)
        target = f"models/{repo_id}" + (f"@{revision}" if revision else "")
        if stage_dir is not None:
            with staged_folder(stage_dir) as staged:
                for name, _ in files:
                    shutil.copy2(work / name, staged / name)
                swap_into_place(staged, stage_dir)
            print(f"staged in {stage_dir}", file=stream)
        if dry_run:
            print(f"{len(files)} files, {total:,d} bytes; model rebuilt from them; would upload "
                  f"to {target}{' (private)' if private else ''}", file=stream)
            return files
        commit = upload(work, repo_id, private=private, revision=revision, token=token,
                        timeout=timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    pin = f"hf://{repo_id}@{commit}" if commit else f"hf://{repo_id}"
    print(f"uploaded {len(files)} files ({total:,d} bytes) to {target}; load it with {pin}",
          file=stream)
    return files


def main(argv: list[str] | None = None) -> list[tuple[str, int]]:
    args = build_parser().parse_args(argv)
    with exit_on_error():
        return publish(args.run, args.repo_id, private=args.private, dry_run=args.dry_run,
                       revision=args.revision, license=args.license, stage_dir=args.stage,
                       timeout=args.timeout)


def cli() -> None:
    """The ``rudder-publish`` console script: :func:`main` with its return value dropped."""
    main()


if __name__ == "__main__":
    cli()
