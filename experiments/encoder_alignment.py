"""How well a frozen sentence encoder aligns each language with the training language,
before any model is trained: caption-to-caption retrieval of same-segment translations.

``python -m experiments.encoder_alignment [--dataset sample] [--source mr]
[--fit-langs mr hi en] [--report F]``

Protocol. On the test split, the candidates are the distinct texts of the captions in the
source language S (a text that several segments share is one candidate, so repeated
captions do not tie with themselves). Every caption in another language whose segment
(video, start, end) has an S caption is a query; it ranks all candidates by the cosine of
their encoder vectors, and its hit is the text of its segment's first S caption. Ranks
are 1-based and tie-averaged (``1 + #higher + #tied others / 2``, the convention of
:mod:`rudder.evaluation.metrics`); R@K is the percentage of queries ranked at most K.

Projections, applied to queries and candidates alike; each is fitted on the *training*
captions of the fitting languages only (``--fit-langs``), so a language outside them is
zero-shot in every row (``ZS``) and one inside is not (``fit``):

- ``none``: the encoder's vectors.
- ``null m``: the m translation-difference directions removed
  (:func:`rudder.text.encoders.translation_directions` on the same-segment pairs of a
  fitting language and S, as ``data.sentence_pivot_nullspace`` does for the pivot search;
  Bolukbasi et al. 2016, Sec. 5), then unit length.
- ``fisher d``: a trained language-agnostic projection, :func:`fisher_projection` with each
  training segment's captions in the fitting languages as one class: the d directions that
  separate segments most relative to how translations of one segment differ (Fisher 1936;
  with two languages a CCA with one projection shared by both, as Faruqui & Dyer, EACL 2014,
  fit on translation pairs).

The rows tell whether any projection fitted without a language's text brings its alignment
with S up to the fitting languages' own (experiments/results/encoder-alignment-sample.md).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import numpy as np
import scipy.linalg

from rudder.atomic import atomic_write_text
from rudder.cli import ArgumentParser, output_file
from rudder.data.lookup import resolve_dataset
from rudder.evaluation.metrics import target_ranks
from rudder.text.encoders import _unit, same_segment_pairs, translation_directions

NULLSPACES = (8, 16, 32)
FISHER_DIMS = (64, 128)
FISHER_SHRINKAGE = 1e-2  # s: Sw + s * mean(eigenvalues of Sw) * I (Friedman 1989, RDA)
KS = (1, 5)

Projection = Callable[[np.ndarray], np.ndarray]


def fisher_scatter(vectors: np.ndarray, classes: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """``(S_w, S_b)``, float64: the within-class scatter ``Σ_c Σ_{i∈c} (x_i - μ_c)(x_i -
    μ_c)^T / n`` and the between-class scatter ``Σ_c n_c (μ_c - μ)(μ_c - μ)^T / n`` of the
    rows of ``vectors`` (class ``classes[i]``; μ the mean of all n rows)."""
    x = np.asarray(vectors, dtype=np.float64)
    _, inverse, counts = np.unique(np.asarray(classes, dtype=object).astype(str),
                                   return_inverse=True, return_counts=True)
    means = np.zeros((len(counts), x.shape[1]))
    np.add.at(means, inverse, x)
    means /= counts[:, None]
    within = x - means[inverse]
    between = (means - x.mean(axis=0)) * np.sqrt(counts)[:, None]
    return within.T @ within / len(x), between.T @ between / len(x)


def fisher_projection(vectors: np.ndarray, classes: Sequence, d: int,
                      shrinkage: float = FISHER_SHRINKAGE) -> tuple[np.ndarray, np.ndarray]:
    """``(μ, W)``: Fisher's discriminant directions (Fisher 1936; Rao 1948 for several
    classes), the top-d generalised eigenvectors of ``S_b w = λ (S_w + s ω I) w``
    (:func:`fisher_scatter`; ``ω`` the mean eigenvalue of ``S_w``, ``s = shrinkage``: the
    regularised discriminant of Friedman, JASA 1989), in decreasing λ, each scaled so that
    ``w^T (S_w + s ω I) w = 1`` (``scipy.linalg.eigh``; a tie at the d-th λ leaves the
    subspace to LAPACK's order). A vector x projects to ``(x - μ) W``."""
    within, between = fisher_scatter(vectors, classes)
    if not 1 <= d <= len(within):
        raise ValueError(f"d={d}: expected 1 to {len(within)}")
    regularised = within + shrinkage * max(np.trace(within) / len(within), 1e-12) * np.eye(
        len(within))
    _, directions = scipy.linalg.eigh(between, regularised)
    mean = np.asarray(vectors, dtype=np.float64).mean(axis=0)
    return mean, directions[:, ::-1][:, :d]


def segment_ranks(queries: np.ndarray, candidates: np.ndarray, hits: np.ndarray) -> np.ndarray:
    """1-based tie-averaged rank of candidate ``hits[i]`` among all candidates by the dot
    product with query i (``1 + #higher + #tied others / 2``)."""
    return 1 + target_ranks(queries @ candidates.T, hits)


def segments_of(table: dict) -> list[tuple]:
    return list(zip(table["video_id"], table["start"], table["end"], strict=True))


def _removal(basis: np.ndarray) -> Projection:
    return lambda x: _unit(x - (x @ basis) @ basis.T)


def _discriminant(mean: np.ndarray, directions: np.ndarray) -> Projection:
    return lambda x: _unit((x - mean) @ directions)


def fitted_projections(encode: Callable[[list[str]], np.ndarray], train: dict, source: str,
                       fit_langs: Sequence[str]) -> dict[str, Projection]:
    """Name -> projection (module docstring), fitted on the rows of ``train`` (a captions
    table as a dict of columns) in ``fit_langs`` only; no other row's text is encoded."""
    keep = [i for i, lang in enumerate(train["lang"]) if lang in fit_langs]
    texts = [train["text"][i] for i in keep]
    langs = [train["lang"][i] for i in keep]
    every_segment = segments_of(train)
    segments = [every_segment[i] for i in keep]
    raw = np.asarray(encode(texts), dtype=np.float64) if texts else np.zeros((0, 0))
    projections: dict[str, Projection] = {"none": lambda x: x}
    pairs = same_segment_pairs(langs, segments, set(fit_langs) - {source}, {source})
    if pairs:
        first, second = (np.asarray(side) for side in zip(*pairs, strict=True))
        basis = translation_directions(raw[first], raw[second], max(NULLSPACES)).astype(
            np.float64)
        for m in NULLSPACES:
            projections[f"null {m}"] = _removal(basis[:, :m])
    counts: dict[tuple, int] = {}
    for segment in segments:
        counts[segment] = counts.get(segment, 0) + 1
    shared = [i for i, segment in enumerate(segments) if counts[segment] > 1]
    if shared:
        classes = [repr(segments[i]) for i in shared]
        for d in FISHER_DIMS:
            if d <= raw.shape[1]:
                projections[f"fisher {d}"] = _discriminant(*fisher_projection(
                    raw[shared], classes, d))
    return projections


def alignment_table(encode: Callable[[list[str]], np.ndarray], train: dict, test: dict,
                    source: str, fit_langs: Sequence[str]) -> dict[str, dict[str, dict]]:
    """Projection -> language -> ``{"queries": n, "R1": %, "R5": %, "MdR": median rank}``
    of the module docstring's retrieval on ``test``."""
    segments = segments_of(test)
    first: dict[tuple, str] = {}  # segment -> the text of its first source caption
    for text, lang, segment in zip(test["text"], test["lang"], segments, strict=True):
        if lang == source:
            first.setdefault(segment, text)
    candidates = sorted(set(first.values()))
    column = {text: j for j, text in enumerate(candidates)}
    target = np.asarray(encode(candidates), dtype=np.float64)
    queries: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for lang in sorted(set(test["lang"]) - {source}):
        rows = [i for i, (g, s) in enumerate(zip(test["lang"], segments, strict=True))
                if g == lang and s in first]
        if rows:
            hits = np.asarray([column[first[segments[i]]] for i in rows])
            queries[lang] = (np.asarray(encode([test["text"][i] for i in rows]), np.float64),
                             hits)
    table: dict[str, dict[str, dict]] = {}
    for name, project in fitted_projections(encode, train, source, fit_langs).items():
        candidate_vectors = project(target)
        table[name] = {}
        for lang, (vectors, hits) in queries.items():
            ranks = segment_ranks(project(vectors), candidate_vectors, hits)
            table[name][lang] = {"queries": len(hits), "MdR": float(np.median(ranks)),
                                 **{f"R{k}": float(100 * np.mean(ranks <= k)) for k in KS}}
    return table


def seen_in_training(train: dict, test: dict, source: str) -> dict[str, float]:
    """Language (not ``source``) -> % of its test captions whose exact text is also one of
    its training captions."""
    known = set(zip(train["lang"], train["text"], strict=True))
    shares: dict[str, list[bool]] = {}
    for lang, text in zip(test["lang"], test["text"], strict=True):
        if lang != source:
            shares.setdefault(lang, []).append((lang, text) in known)
    return {lang: 100 * float(np.mean(flags)) for lang, flags in sorted(shares.items())}


def report(table: dict, header: dict) -> str:
    """The Markdown report of :func:`alignment_table`."""
    langs = sorted({lang for cells in table.values() for lang in cells})
    fit = set(header["fit_langs"])
    lines = [f"# Encoder alignment with {header['source']} on the {header['dataset_note']}", "",
             (f"Command: `{header['command']}`; encoder {header['encoder']}; fitting languages "
             f"{', '.join(header['fit_langs'])} (training captions only). Test split: each "
             f"caption ranks the {header['candidates']} distinct {header['source']} caption "
             "texts "
             "by cosine; R@1 / R@5 (%) and median rank of its own segment's. `fit`: a "
             "language whose training captions fitted the projection; `ZS`: one whose text "
             "no row read (the module docstring of `experiments.encoder_alignment` gives "
             "each projection's source)."), "",
             "| projection | " + " | ".join(
                 f"{lang} ({'fit' if lang in fit else 'ZS'}; {table['none'][lang]['queries']})"
                 for lang in langs) + " |",
             "|---" * (len(langs) + 1) + "|"]
    for name, cells in table.items():
        lines.append(f"| {name} | " + " | ".join(
            f"{cells[lang]['R1']:.1f} / {cells[lang]['R5']:.1f} / {cells[lang]['MdR']:g}"
            for lang in langs) + " |")
    seen = header.get("seen_in_training", {})
    if seen:
        lines += ["", ("Test queries whose exact text is also a training caption of their "
                       "language (in a fitting language, text the projections were fitted "
                       "on): ") + ", ".join(f"{lang} {seen[lang]:.0f}%" for lang in langs
                                          if lang in seen) + "."]
    zero_shot = [lang for lang in langs if lang not in fit]
    if zero_shot:
        best = {lang: max(table, key=lambda name: (table[name][lang]["R1"], name == "none"))
                for lang in zero_shot}
        lines += ["", "Best R@1 of each zero-shot language over the projections: " + "; ".join(
            f"{lang} {table[best[lang]][lang]['R1']:.1f} ({best[lang]}; none "
            f"{table['none'][lang]['R1']:.1f})" for lang in zero_shot) + "."]
    return "\n".join(lines) + "\n"


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m experiments.encoder_alignment",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="sample")
    parser.add_argument("--encoder", default="multilingual-e5",
                        help="data.text_encoder of a sentence encoder")
    parser.add_argument("--source", default="mr", help="the training language")
    parser.add_argument("--fit-langs", nargs="+", default=["mr", "hi", "en"])
    parser.add_argument("--report", type=output_file,
                        help="also write the Markdown report here")
    return parser


def main(argv: list[str] | None = None) -> dict:
    """Print (and with ``--report`` write) the report; returns the table."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from rudder.errors import RudderError
    from rudder.languages import check_language, check_languages

    try:
        check_language(args.source, "--source")
        check_languages(args.fit_langs, "--fit-langs")
    except RudderError as error:
        parser.error(str(error))
    if args.source not in args.fit_langs:
        parser.error(f"--fit-langs {' '.join(args.fit_langs)}: include --source {args.source}")
    from rudder.errors import exit_on_error
    from rudder.text.encoders import encoder_kind, load_text_encoder

    if encoder_kind(args.encoder) != "sentence":
        parser.error(f"--encoder {args.encoder}: a sentence encoder is needed "
                     "(multilingual-e5 or sentence:FOLDER)")
    with exit_on_error():
        encoder = load_text_encoder(args.encoder)
        dataset = resolve_dataset(args.dataset)
        columns = ["text", "lang", "video_id", "start", "end"]
        train = dataset.captions("train", columns=columns).to_pydict()
        test = dataset.captions("test", columns=columns).to_pydict()
        table = alignment_table(encoder.vectors, train, test, args.source, args.fit_langs)
    header = {"command": "python -m experiments.encoder_alignment " + " ".join(
                  argv if argv is not None else sys.argv[1:]),
              "encoder": args.encoder, "source": args.source, "fit_langs": args.fit_langs,
              "dataset_note": ("embedded sample (simulated data)" if dataset.meta.simulated
                               else args.dataset),
              "candidates": len({t for t, g in zip(test["text"], test["lang"], strict=True)
                                  if g == args.source})}
    header["seen_in_training"] = seen_in_training(train, test, args.source)
    text = report(table, header)
    if args.report:
        atomic_write_text(args.report, text)
    print(text)
    return table


if __name__ == "__main__":
    main()
