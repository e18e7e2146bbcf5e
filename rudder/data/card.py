"""The README dataset card: YAML front matter whose ``configs:`` block lets
``datasets.load_dataset(folder, config)`` load every config, then prose for people.

Each config carries ``description: "data sha256 <digest>"``, the digest of its data files'
bytes. ``datasets`` 5 caches a local folder under a hash of the card's ``dataset_info`` and
builder configs only: the ``data_files`` enter it as patterns, not as the files' mtimes or
contents, so a parquet file rewritten in place under an unchanged card loads the old cache.
``description`` is the config field that reaches that hash, so every rewrite refreshes it
(:func:`refresh_digests`, called by the layout writers).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from rudder.atomic import atomic_write_text

SPLITS = ("train", "validation", "test")  # every config uses these split names
DIGEST_PREFIX = "data sha256 "


@dataclass
class Card:
    """Human-facing parts of the README dataset card."""

    pretty_name: str
    description: str
    license: str = "other"
    citation: str = ""
    how_built: str = ""
    license_name: str = ""  # an id for the licence when ``license`` is "other"
    licence_terms: str = ""  # the terms in words, shown under "## Licence"


def _config_names(experts) -> list[str]:
    """Every config a folder can have, in card order."""
    features = [f"features.{e}" for e in sorted(experts)]
    return ["captions", "videos", *features, "text_features", "relations"]


def config_path(config: str, split: str) -> str:
    """The parquet file of one split of a config, relative to the folder (relations: one
    file, listed as the train split)."""
    if config == "relations":
        return "relations/all.parquet"
    if config.startswith("features."):
        return f"features/{config[len('features.'):]}/{split}.parquet"
    return f"{config}/{split}.parquet"


def row_counts(root, experts) -> dict[tuple[str, str], int]:
    """``(config, split) -> rows`` of every parquet file of the folder's configs, read from
    the footers: the counts a card is rendered from (build and translate alike)."""
    counts = {}
    for config in _config_names(experts):
        for split in ("train",) if config == "relations" else SPLITS:
            path = Path(root) / config_path(config, split)
            if path.is_file():
                counts[(config, split)] = pq.ParquetFile(path).metadata.num_rows
    return counts


def _configs_block(experts, counts: dict, digests: dict) -> list[dict]:
    """The ``configs:`` list of the configs with rows; empty splits are left out
    (``datasets`` rejects them, and a config with no files)."""
    configs: list[dict] = []
    for name in _config_names(experts):
        files = [
            {"split": s, "path": config_path(name, s)}
            for s in SPLITS
            if counts.get((name, s), 0) > 0
        ]
        if files:
            configs.append({"config_name": name, "data_files": files})
            if name == "captions":
                configs[-1]["default"] = True
            if name in digests:
                configs[-1]["description"] = digests[name]
    return configs


def render_card(meta, card: Card, counts: dict, digests=None) -> str:
    """The README.md dataset card: YAML front matter with ``configs:``, then prose.

    ``counts`` are :func:`row_counts`; ``digests`` ({config: description}, see
    :func:`card_digests`) keeps the data digests of an existing card; a new folder gets them
    from :func:`refresh_digests`. A ``license: other`` names the licence with
    ``license_name``, as the Hub's dataset card spec asks.
    """
    licence = {"license": card.license}
    if card.license == "other" and card.license_name:
        licence["license_name"] = card.license_name
    multilingual = ["multilingual"] if len(meta.languages) > 1 else []
    front = {
        "pretty_name": card.pretty_name,
        **licence,
        "language": list(meta.languages),
        "task_categories": ["text-retrieval"],
        "tags": (["video-retrieval", *multilingual, "rudder"]
                 + (["simulated"] if meta.simulated else [])),
        "configs": _configs_block(meta.experts, counts, digests or {}),
    }
    lines = ["---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True).rstrip(), "---", ""]
    lines += [f"# {card.pretty_name}", "", card.description.strip(), ""]
    lines += ["## Contents", "", "| config | split | rows |", "|---|---|---|"]
    for (config, split), rows in sorted(counts.items()):
        if rows:
            lines.append(f"| {config} | {split} | {rows} |")
    lines += ["", "## Experts", "", "| expert | dim | variable length |", "|---|---|---|"]
    for name, info in sorted(meta.experts.items()):
        lines.append(f"| {name} | {info.dim} | {'yes' if info.variable_length else 'no'} |")
    if card.how_built:
        lines += ["", "## How it was built", "", card.how_built.strip()]
    lines += ["", "## Licence", "", card.license]
    if card.licence_terms:
        lines += ["", card.licence_terms.strip()]
    if card.citation:
        lines += ["", "## Citation", "", "```bibtex", card.citation.strip(), "```"]
    return "\n".join(lines) + "\n"


def _split_card(root):
    """``(path, front matter dict, rest of the text)``, or ``None`` without a YAML card."""
    card = Path(root) / "README.md"
    if not card.is_file():
        return None
    text = card.read_text(encoding="utf-8")
    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        return None
    end = text.index("\n---\n", 4)
    return card, yaml.safe_load(text[4:end]) or {}, text[end:]


def _write_front(card: Path, front: dict, rest: str) -> None:
    body = yaml.safe_dump(front, sort_keys=False, allow_unicode=True).rstrip()
    atomic_write_text(card, f"---\n{body}{rest}")


def data_digest(root, paths) -> str:
    """SHA-256 (16 hex digits) over the relative paths and bytes of ``paths`` under ``root``."""
    digest = hashlib.sha256()
    for relative in sorted(paths):
        digest.update(relative.encode("utf-8") + b"\0")
        with open(Path(root) / relative, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return DIGEST_PREFIX + digest.hexdigest()[:16]


def _config_paths(config: dict) -> list[str]:
    files = config.get("data_files") or []
    return [f["path"] for f in files if isinstance(f, dict) and isinstance(f.get("path"), str)]


def listed_paths(root, config_name: str) -> list[str]:
    """The files the card's ``configs:`` block lists for one config (none without a card)."""
    parts = _split_card(root)
    configs = parts[1].get("configs", []) if parts else []
    return [p for c in configs if isinstance(c, dict) and c.get("config_name") == config_name
            for p in _config_paths(c)]


def card_digests(root) -> dict[str, str]:
    """The data digests an existing card records, ``{config_name: description}``."""
    parts = _split_card(root)
    if parts is None:
        return {}
    return {
        c["config_name"]: c["description"]
        for c in parts[1].get("configs", [])
        if str(c.get("description", "")).startswith(DIGEST_PREFIX)
    }


def refresh_digests(root, folder: str | None = None) -> None:
    """Recompute the data digest of every config with files under ``folder`` (all: ``None``).

    A folder without a YAML card is left as it is.
    """
    parts = _split_card(root)
    if parts is None:
        return
    card, front, rest = parts
    for config in front.get("configs", []):
        paths = _config_paths(config)
        touched = folder is None or any(p.startswith(folder.rstrip("/") + "/") for p in paths)
        if paths and touched and all((Path(root) / p).is_file() for p in paths):
            config["description"] = data_digest(root, paths)
    _write_front(card, front, rest)


def ensure_config(root, config_name: str, data_files: list[dict]) -> None:
    """Add a config to an existing card's ``configs:`` block when it is missing (atomic).

    The new entry changes the card, so ``datasets`` caches afresh; its data digest comes
    with the next rewrite of its files (:func:`refresh_digests`). A folder without a card,
    or with one that has no YAML front matter, is left as it is (rudder reads it either
    way; only ``datasets.load_dataset`` needs the block).
    """
    parts = _split_card(root)
    if parts is None:
        return
    card, front, rest = parts
    configs = front.setdefault("configs", [])
    if any(c.get("config_name") == config_name for c in configs):
        return
    configs.append({"config_name": config_name, "data_files": data_files})
    _write_front(card, front, rest)
