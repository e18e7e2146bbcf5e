"""Does character n-gram hashing help queries whose word forms training never saw?

The sample's captions use a closed lexicon, so every test word form also occurs in training.
This script makes unseen forms the way a user's query would: in each Marathi and English
test caption, every one-word noun (from the caption's manual noun marks) gets a real
inflection appended, Marathi genitive ``-ची`` ("बाटली" -> "बाटलीची") and English plural
``-s``, wherever that form is not in the training vocabulary. It trains the default model
with and without ``data.subword_buckets`` (same seeds) and prints text-to-video R@K and
MdR over those perturbed queries, and over the unperturbed ones for reference.

Usage: python benchmarks/bench_subwords.py [--epochs N] [--seeds 0 1] [--buckets 20000]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from rudder import train
from rudder.data.loader import load_split
from rudder.evaluation import metrics
from rudder.evaluation.inference import similarity_matrix
from rudder.evaluation.loading import load_run
from rudder.text import tokenize

SUFFIX = {"mr": "ची", "en": "s"}


def perturbed_tokens(text: str, lang: str, nouns, vocab) -> list[str] | None:
    """The caption's tokens with each one-word noun inflected, or None if nothing changed."""
    singles = {n for n in nouns or () if len(tokenize(n, lang)) == 1}
    singles = {tokenize(n, lang)[0] for n in singles}
    out, changed = [], False
    for token in tokenize(text, lang):
        form = token + SUFFIX[lang]
        if token in singles and not token.endswith(SUFFIX[lang]) and form not in vocab:
            out.append(form)
            changed = True
        else:
            out.append(token)
    return out if changed else None


def evaluate(run_dir: Path) -> dict[str, dict]:
    run = load_run(run_dir)
    cfg = run.config.data
    data = load_split(run.dataset, "test", run.experts, run.vocab, cfg.caption_langs,
                      None, cfg.max_words, cfg.max_frames)
    nouns = dict(zip(*(run.dataset.captions("test", columns=["caption_id", "nouns"])
                       .to_pydict().values()), strict=True))
    lists, where = [], []
    for v, k in zip(*np.nonzero(data.caption_mask.numpy()), strict=True):
        lang = data.caption_langs[v, k]
        if lang in SUFFIX:
            tokens = perturbed_tokens(data.caption_texts[v, k], lang, nouns[data.caption_ids[v, k]],
                                      run.vocab)
            if tokens is not None:
                lists.append(tokens)
                where.append((v, k))
    ids, mask = run.vocab.batch(lists, max_len=cfg.max_words)
    videos, slots = (torch.tensor(x) for x in zip(*where, strict=True))
    # One width (and n-gram depth) for the original and the perturbed token grids.
    tail = [max(a, b) for a, b in zip(ids.shape[1:], data.tokens.shape[2:], strict=False)]
    tokens, token_mask = (_padded(data.tokens, [*data.tokens.shape[:2], *tail]),
                          _padded(data.token_mask, [*data.tokens.shape[:2], tail[0]]))
    tokens[videos, slots] = _padded(ids, [len(ids), *tail])
    token_mask[videos, slots] = _padded(mask, [len(ids), tail[0]])
    chosen = torch.zeros_like(data.caption_mask)
    chosen[videos, slots] = True
    perturbed = dataclasses.replace(data, tokens=tokens, token_mask=token_mask)
    results = {"queries": len(lists), "videos": data.num_videos}
    for name, split, queries in (("unperturbed", data, chosen),
                                 ("unseen forms", perturbed, chosen)):
        sims = similarity_matrix(run.model, split, "cpu", cfg.max_words, cfg.max_frames)
        results[name] = metrics.retrieval_metrics(sims, query_masks=queries, direction="t2v")
    return results


def _padded(x: torch.Tensor, shape) -> torch.Tensor:
    """``x`` zero-padded at the end of every dimension to ``shape``."""
    out = torch.zeros(shape, dtype=x.dtype)
    out[tuple(slice(0, s) for s in x.shape)] = x
    return out


def train_and_evaluate(root: Path, args) -> dict[str, list[dict]]:
    """{model label: evaluate()'s results per seed}, training runs written under ``root``."""
    table = {}
    for label, extra in (("words", []), (f"words + n-grams ({args.buckets})",
                                         ["--set", f"data.subword_buckets={args.buckets}"])):
        rows = []
        for seed in args.seeds:
            out = root / f"{len(table)}-{seed}"
            train.main(["--output-dir", str(out), "--seed", str(seed), "--epochs", str(args.epochs),
                        *extra])
            rows.append(evaluate(out))
        table[label] = rows
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--buckets", type=int, default=20000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rudder-subwords-") as root:
        table = train_and_evaluate(Path(root), args)
    rows = list(table.values())[-1]
    print(f"\n{rows[0]['queries']} perturbed Marathi/English test queries; "
          f"t2v over {rows[0]['videos']} test videos, "
          f"mean over seeds {args.seeds}")
    print("| model | queries | R1 | R5 | R10 | MdR |")
    print("|---|---|---|---|---|---|")
    for label, rows in table.items():
        for name in ("unperturbed", "unseen forms"):
            mean = {m: np.mean([r[name][m] for r in rows]) for m in ("R1", "R5", "R10", "MdR")}
            print(f"| {label} | {name} | {mean['R1']:.1f} | {mean['R5']:.1f} | {mean['R10']:.1f} "
                  f"| {mean['MdR']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
