"""The README dataset card: YAML front matter whose ``configs:`` block lets
``datasets.load_dataset(folder, config)`` load every config, then prose for people."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from rudder.atomic import atomic_write_text

SPLITS = ("train", "validation", "test")  # every config uses these split names


@dataclass
class Card:
    """Human-facing parts of the README dataset card."""

    pretty_name: str
    description: str
    license: str = "other"
    citation: str = ""
    how_built: str = ""


def _configs_block(experts, has_relations: bool, counts: dict) -> list[dict]:
    """The ``configs:`` list; empty splits are left out (``datasets`` rejects them)."""

    def per_split(config, folder):
        return [
            {"split": s, "path": f"{folder}/{s}.parquet"}
            for s in SPLITS
            if counts.get((config, s), 0) > 0
        ]

    configs = [
        {"config_name": "captions", "data_files": per_split("captions", "captions"), "default": True},
        {"config_name": "videos", "data_files": per_split("videos", "videos")},
    ]
    configs += [
        {"config_name": f"features.{e}", "data_files": per_split(f"features.{e}", f"features/{e}")}
        for e in sorted(experts)
    ]
    if any(counts.get(("text_features", s), 0) for s in SPLITS):
        configs.append({"config_name": "text_features", "data_files": per_split("text_features", "text_features")})
    if has_relations:
        configs.append(
            {"config_name": "relations", "data_files": [{"split": "train", "path": "relations/all.parquet"}]}
        )
    return configs


def render_card(meta, card: Card, counts: dict, has_relations: bool) -> str:
    """The README.md dataset card: YAML front matter with ``configs:``, then prose."""
    front = {
        "pretty_name": card.pretty_name,
        "license": card.license,
        "language": list(meta.languages),
        "task_categories": ["text-retrieval"],
        "tags": ["video-retrieval", "multilingual", "rudder"] + (["simulated"] if meta.simulated else []),
        "configs": _configs_block(meta.experts, has_relations, counts),
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


def ensure_config(root, config_name: str, data_files: list[dict]) -> None:
    """Add a config to an existing card's ``configs:`` block when it is missing (atomic).

    A folder without a card, or with one that has no YAML front matter, is left as it is
    (rudder reads it either way; only ``datasets.load_dataset`` needs the block).
    """
    card = Path(root) / "README.md"
    if not card.is_file():
        return
    text = card.read_text(encoding="utf-8")
    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        return
    end = text.index("\n---\n", 4)
    front = yaml.safe_load(text[4:end]) or {}
    configs = front.setdefault("configs", [])
    if any(c.get("config_name") == config_name for c in configs):
        return
    configs.append({"config_name": config_name, "data_files": data_files})
    body = yaml.safe_dump(front, sort_keys=False, allow_unicode=True).rstrip()
    atomic_write_text(card, f"---\n{body}{text[end:]}")
