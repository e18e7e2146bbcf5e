import pytest

from heuristics.conllu import (
    ConlluError,
    format_conllu,
    read_conllu,
    split_sentences,
    surface_sentence,
)

# Marathi "लाडामुळे तो हसला ." with the multiword token लाडामुळे = लाडा (NOUN) + मुळे (ADP),
# an empty node (ignored) and a comment block.
MARATHI = """# sent_id = 1
# text = लाडामुळे तो हसला.
1-2\tलाडामुळे\t_\t_\t_\t_\t_\t_\t_\t_
1\tलाडा\tलाड\tNOUN\t_\tCase=Obl\t4\tobl\t_\t_
2\tमुळे\tमुळे\tADP\t_\t_\t1\tcase\t_\t_
3\tतो\tतो\tPRON\t_\t_\t4\tnsubj\t_\t_
3.1\tx\tx\tX\t_\t_\t_\t_\t_\t_
4\tहसला\tहसणे\tVERB\t_\t_\t0\troot\t_\t_
5\t.\t.\tPUNCT\t_\t_\t4\tpunct\t_\t_

"""


def write(tmp_path, text, name="x.conllu"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_words_ranges_and_comments(tmp_path):
    (sentence,) = read_conllu(write(tmp_path, MARATHI))
    assert [w.form for w in sentence.words] == ["लाडा", "मुळे", "तो", "हसला", "."]
    assert [w.head for w in sentence.words] == [4, 1, 4, 0, 4]
    assert sentence.multiword[0].start == 1 and sentence.multiword[0].end == 2
    assert sentence.comment("sent_id") == "1"
    assert sentence.words[3].line == 8  # after 2 comments, the range, 3 words and the empty node


def test_round_trip(tmp_path):
    sentences = read_conllu(write(tmp_path, MARATHI))
    again = read_conllu(write(tmp_path, format_conllu(sentences), "y.conllu"))
    assert [(w.form, w.lemma, w.upos, w.head) for w in again[0].words] == [
        (w.form, w.lemma, w.upos, w.head) for w in sentences[0].words
    ]
    assert again[0].multiword == sentences[0].multiword


WORD = "{}\t{}\t_\tNOUN\t_\t_\t{}\tdep\t_\t_"
EMPTY_COLUMNS = "\t_" * 8


@pytest.mark.parametrize(
    "line, message",
    [
        ("1\tcut\tcut\tVERB\t_\t_\t0\troot\t_", "x.conllu:2: expected 10 tab-separated columns"),
        ("1\tcut\tcut\tVERBS\t_\t_\t0\troot\t_\t_", "x.conllu:2: UPOS 'VERBS'"),
        ("1\tcut\tcut\tVERB\t_\t_\tzero\troot\t_\t_", "x.conllu:2: HEAD 'zero'"),
        ("2\tcut\tcut\tVERB\t_\t_\t0\troot\t_\t_", "x.conllu:2: word id 2 out of order"),
        ("1\tcut\tcut\tVERB\t_\t_\t5\troot\t_\t_", "x.conllu:2: HEAD 5 points past the last word"),
        ("one\tcut\tcut\tVERB\t_\t_\t0\troot\t_\t_", "x.conllu:2: bad ID 'one'"),
        ("\u00b9\tcut\tcut\tVERB\t_\t_\t0\troot\t_\t_", "x.conllu:2: bad ID '\u00b9'"),
        ("1\tcut\tcut\tVERB\t_\t_\t\u00b2\troot\t_\t_", "x.conllu:2: HEAD '\u00b2'"),
        (
            f"{WORD.format(1, 'a', 0)}\n2-3\tbc{EMPTY_COLUMNS}\n{WORD.format(2, 'b', 1)}",
            r"x.conllu:3: multiword range 2-3 goes past the last word \(2\)",
        ),
        (
            (
                f"1-2\tab{EMPTY_COLUMNS}\n{WORD.format(1, 'a', 0)}\n2-3\tbc{EMPTY_COLUMNS}\n"
                f"{WORD.format(2, 'b', 1)}\n{WORD.format(3, 'c', 1)}"
            ),
            r"x.conllu:4: multiword range '2-3' overlaps 1-2 \(line 2\)",
        ),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path, line, message):
    with pytest.raises(ConlluError, match=message):
        read_conllu(write(tmp_path, "# sent_id = 1\n" + line + "\n\n"))


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(ConlluError, match="no such CoNLL-U file"):
        read_conllu(tmp_path / "absent.conllu")
    with pytest.raises(ConlluError, match="no sentences"):
        read_conllu(write(tmp_path, "\n\n"))


def test_surface_collapses_multiword_tokens_and_drops_punctuation(tmp_path):
    (sentence,) = read_conllu(write(tmp_path, MARATHI))
    surface = surface_sentence(sentence, retokenize=lambda form: [] if form == "." else [form])
    # लाडामुळे takes the tags of its content word लाडा; the ADP disappears into it; "." is dropped.
    assert [(w.id, w.form, w.lemma, w.upos, w.head, w.deprel) for w in surface.words] == [
        (1, "लाडामुळे", "लाड", "NOUN", 3, "obl"),
        (2, "तो", "तो", "PRON", 3, "nsubj"),
        (3, "हसला", "हसणे", "VERB", 0, "root"),
    ]


def test_surface_splits_forms_the_tokeniser_splits(tmp_path):
    text = "1\te-mail\te-mail\tNOUN\t_\t_\t0\troot\t_\t_\n2\tit\tit\tPRON\t_\t_\t1\tdep\t_\t_\n\n"
    no_lemmas = text.replace("e-mail\tNOUN", "_\tNOUN", 1).replace("\tit\tPRON", "\t_\tPRON")
    (sentence,) = read_conllu(write(tmp_path, text))
    surface = surface_sentence(
        sentence, retokenize=lambda form: form.split("-"), normalise_lemma=str.upper
    )
    assert [(w.id, w.form, w.lemma, w.head, w.deprel) for w in surface.words] == [
        (1, "e", "E", 0, "root"),
        (2, "mail", "MAIL", 1, "flat"),
        (3, "it", "IT", 1, "dep"),
    ]
    # a treebank without lemmas (te_mtg) stays without: the pieces do not invent any
    (sentence,) = read_conllu(write(tmp_path, no_lemmas, "n.conllu"))
    surface = surface_sentence(sentence, retokenize=lambda form: form.split("-"))
    assert [w.lemma for w in surface.words] == ["_", "_", "_"]


def test_dropped_head_passes_its_dependents_up(tmp_path):
    # "x" (dropped) heads "b"; "b" must climb to x's head, the root "a".
    text = (
        "1\ta\ta\tNOUN\t_\t_\t0\troot\t_\t_\n2\tx\tx\tPUNCT\t_\t_\t1\tpunct\t_\t_\n"
        "3\tb\tb\tNOUN\t_\t_\t2\tdep\t_\t_\n\n"
    )
    (sentence,) = read_conllu(write(tmp_path, text))
    surface = surface_sentence(sentence, retokenize=lambda form: [] if form == "x" else [form])
    assert [(w.form, w.head) for w in surface.words] == [("a", 0), ("b", 1)]


def test_split_sentences_by_position():
    parts = split_sentences(
        list(range(23)), {"train": tuple(range(7)), "dev": (7,), "test": (8, 9)}, modulus=10
    )
    assert parts["dev"] == [7, 17]
    assert parts["test"] == [8, 9, 18, 19]
    assert len(parts["train"]) == 17
    with pytest.raises(ValueError, match="cover"):
        split_sentences([1], {"a": (0,)}, modulus=2)
