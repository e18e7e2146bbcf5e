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


def _configs_block(experts, has_relations: bool, counts: dict, digests: dict) -> list[dict]:
    """The ``configs:`` list; empty splits are left out (``datasets`` rejects them)."""

    def per_split(config, folder):
        return [
            {"split": s, "path": f"{folder}/{s}.parquet"}
            for s in SPLITS
            if counts.get((config, s), 0) > 0
        ]

    configs = [
        {"config_name": "captions", "data_files": per_split("captions", "captions"),
         "default": True},
        {"config_name": "videos", "data_files": per_split("videos", "videos")},
    ]
    configs += [
        {"config_name": f"features.{e}", "data_files": per_split(f"features.{e}", f"features/{e}")}
        for e in sorted(experts)
    ]
    if any(counts.get(("text_features", s), 0) for s in SPLITS):
        configs.append({"config_name": "text_features",
                        "data_files": per_split("text_features", "text_features")})
    if has_relations:
        configs.append(
            {"config_name": "relations",
             "data_files": [{"split": "train", "path": "relations/all.parquet"}]}
        )
    for config in configs:
        if config["config_name"] in digests:
            config["description"] = digests[config["config_name"]]
    return configs


def render_card(meta, card: Card, counts: dict, has_relations: bool, digests=None) -> str:
    """The README.md dataset card: YAML front matter with ``configs:``, then prose.

    ``digests`` ({config: description}, see :func:`card_digests`) keeps the data digests of
    an existing card; a new folder gets them from :func:`refresh_digests`.
    """
    front = {
        "pretty_name": card.pretty_name,
        "license": card.license,
        "language": list(meta.languages),
        "task_categories": ["text-retrieval"],
        "tags": (["video-retrieval", "multilingual", "rudder"]
                 + (["simulated"] if meta.simulated else [])),
        "configs": _configs_block(meta.experts, has_relations, counts, digests or {}),
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
