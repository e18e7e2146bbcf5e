"""Write rudder/data/hi_mr_ngrams.tsv, the Hindi/Marathi model of rudder.languages.

Training text: the sample generator's Hindi and Marathi captions (rudder.data.sample_text),
Marathi UD-UFAL train, and nine sentences in ten of Hindi UD-PUD test. The temperature is
fitted on Marathi UD-UFAL dev and the fifth sentence of each ten of Hindi PUD; Marathi
UD-UFAL test and the first sentence of each ten of Hindi PUD are held apart for evaluation
(tests/test_languages.py). Run from the repository root:

    python scripts/language_ngrams.py            # write the file
    python scripts/language_ngrams.py --check    # exit 1 if the shipped file differs
    python scripts/language_ngrams.py --evaluate # accuracy on the held-apart sentences
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rudder import languages
from rudder.data import sample_text

UD = ROOT.parent / "shared" / "data" / "ud"
LANGS = ("hi", "mr")
ALPHA = 0.5
MIN_COUNT = 5  # features seen fewer times in all training text are left out
SPLITS = ("train", "calibration", "test")


def ud_texts(path: Path) -> list[str]:
    """The ``# text = ...`` sentences of a CoNLL-U file, in file order."""
    with open(path, encoding="utf-8") as handle:
        return [line[len("# text = ") :].strip() for line in handle if line.startswith("# text = ")]


def ud_split(ud_dir: Path = UD) -> dict[str, dict[str, list[str]]]:
    """``{split: {lang: sentences}}`` of the UD files (see the module docstring)."""
    hindi = ud_texts(ud_dir / "hi_pud-ud-test.conllu")
    return {
        "train": {
            "hi": [s for i, s in enumerate(hindi) if i % 10 not in (0, 5)],
            "mr": ud_texts(ud_dir / "mr_ufal-ud-train.conllu"),
        },
        "calibration": {
            "hi": hindi[5::10],
            "mr": ud_texts(ud_dir / "mr_ufal-ud-dev.conllu"),
        },
        "test": {"hi": hindi[0::10], "mr": ud_texts(ud_dir / "mr_ufal-ud-test.conllu")},
    }


def sample_sentences(lang: str) -> list[str]:
    """The sample generator's captions: every action once with each material, and every
    listing opening over materials three at a time."""
    materials, actions = sample_text.MATERIALS, sample_text.ACTIONS
    texts = []
    for k, x in enumerate(materials):
        action = actions[k % len(actions)]
        y = materials[(k + 1) % len(materials)]
        takes_i = "i" in sample_text.ACTION_ARGS[action.removeprefix("v:")]
        i = "n:scissors" if takes_i and k % 2 else None
        texts.append(sample_text.render_describing(lang, [(action, x, y, i)], k % 4))
    for start in range(0, len(materials), 3):
        chunk = list(materials[start : start + 3])
        texts.append(sample_text.render_listing(lang, chunk, start % 4))
    return texts


def words(text: str) -> list[str]:
    return languages.words_in_script(text, "Devanagari")


def chunks(text: str, sizes=(1, 2, 3, 5)) -> list[list[str]]:
    """The whole sentence's words, then consecutive non-overlapping runs of each size (short
    queries are what the app sees)."""
    ws = words(text)
    runs = [ws]
    for size in sizes:
        runs += [ws[i : i + size] for i in range(0, len(ws) - size + 1, size)]
    return [run for run in runs if run]


def count_features(texts_by_lang: dict[str, list[str]]) -> dict[str, Counter]:
    counts = {}
    for lang in LANGS:
        counter = Counter()
        for text in texts_by_lang[lang]:
            for word in words(text):
                counter.update(languages.word_features(word))
        counts[lang] = counter
    return counts


def fit_temperature(model: languages.NgramModel, texts_by_lang) -> float:
    """The temperature (on a log grid from 1 to 100) with the least negative log-likelihood
    of the true language over the calibration chunks."""
    examples = [
        (model.log_likelihoods(run), model.langs.index(lang))
        for lang in LANGS
        for text in texts_by_lang[lang]
        for run in chunks(text)
    ]
    best = None
    for step in range(201):
        temperature = math.exp(math.log(100.0) * step / 200)
        nll = 0.0
        for loglik, truth in examples:
            scaled = [value / temperature for value in loglik]
            top = max(scaled)
            nll -= scaled[truth] - top - math.log(sum(math.exp(v - top) for v in scaled))
        if best is None or nll < best[0]:
            best = (nll, temperature)
    return round(best[1], 3)


def render(ud_dir: Path = UD) -> str:
    """The text of the model file."""
    split = ud_split(ud_dir)
    train = {lang: sample_sentences(lang) + split["train"][lang] for lang in LANGS}
    counts = count_features(train)
    features = sorted(
        f for f in set().union(*counts.values()) if sum(c[f] for c in counts.values()) >= MIN_COUNT
    )
    rows = ["\t".join([f, *(str(counts[lang][f]) for lang in LANGS)]) for f in features]
    header = [
        "# Hindi/Marathi naive Bayes counts for rudder.languages, written by"
        + " scripts/language_ngrams.py (do not edit).",
        "# Word (=word) and character n-gram counts in the sample generator's captions,"
        + " UD Marathi-UFAL train (CC BY-SA 4.0) and 9/10 of UD Hindi-PUD (CC BY-SA 3.0).",
        f"#langs\t{','.join(LANGS)}",
        f"#alpha\t{ALPHA}",
        "#temperature\t1.0",
    ]
    untuned = languages.parse_ngram_file("\n".join(header + rows))
    temperature = fit_temperature(untuned, split["calibration"])
    header[-1] = f"#temperature\t{temperature}"
    return "\n".join(header + rows) + "\n"


def evaluate(model: languages.NgramModel, ud_dir: Path = UD) -> dict[str, tuple[int, int]]:
    """``{"<lang> <whole|3 words>": (right, total)}`` on the held-apart test sentences."""
    results = {}
    test = ud_split(ud_dir)["test"]
    for lang in LANGS:
        for name, runs in (
            ("whole", [words(t) for t in test[lang]]),
            ("3 words", [run for t in test[lang] for run in chunks(t, (3,))[1:]]),
            ("1 word", [run for t in test[lang] for run in chunks(t, (1,))[1:]]),
        ):
            runs = [run for run in runs if run]
            right = 0
            for run in runs:
                probs = model.posteriors(run)
                right += model.langs[probs.index(max(probs))] == lang
            results[f"{lang} {name}"] = (right, len(runs))
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ud", type=Path, default=UD, help="folder of the UD .conllu files")
    parser.add_argument("--check", action="store_true", help="compare with the shipped file")
    parser.add_argument("--evaluate", action="store_true", help="held-apart accuracy")
    args = parser.parse_args(argv)
    if args.evaluate:
        model = languages.parse_ngram_file(languages.NGRAM_FILE.read_text(encoding="utf-8"))
        for key, (right, total) in evaluate(model, args.ud).items():
            print(f"{key}: {right}/{total} = {right / total:.3f}")
        return 0
    text = render(args.ud)
    if args.check:
        same = languages.NGRAM_FILE.read_text(encoding="utf-8") == text
        print("up to date" if same else f"{languages.NGRAM_FILE} differs: rerun the script")
        return 0 if same else 1
    languages.NGRAM_FILE.write_text(text, encoding="utf-8")
    print(f"wrote {languages.NGRAM_FILE} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
