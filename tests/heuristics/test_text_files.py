"""Every text file the heuristics commands read: a UTF-8 byte-order mark is skipped, and a
file that is not UTF-8 is one error naming the file and the line of the first bad byte."""

import pytest

from heuristics.__main__ import main
from heuristics.classes import ClassFileError, read_epic_classes, read_lexicon
from heuristics.conllu import ConlluError, read_conllu
from heuristics.eval_classes import read_sentences
from heuristics.relations import RelationError, read_manual, read_video_sets
from heuristics.stop_nouns import StopNounError, read_stop_nouns

SENTENCE = "1\tcut\tcut\tVERB\t_\t_\t0\troot\t_\t_\n2\tpapér\tpapér\tNOUN\t_\t_\t1\tobj\t_\t_\n\n"
KNOWN = {"c1", "c3"}

# name: (reader, its error, file text with one non-ASCII character on line 2)
READERS = {
    "conllu": (read_conllu, ConlluError, "# text = cut papér\n" + SENTENCE),
    "conllu starting with a word": (read_conllu, ConlluError, SENTENCE),
    "video sets": (read_video_sets, RelationError, "video_id,objects,actions\nv1,papér,cut\n"),
    "manual csv": (
        lambda p: read_manual([p], KNOWN),
        RelationError,
        "caption_id_a,caption_id_b,label,annotator\nc1,c3,partial,José\n",
    ),
    "manual jsonl": (
        lambda p: read_manual([p], KNOWN),
        RelationError,
        (
            '{"caption_id_a": "c1", "caption_id_b": "c3", "label": 1}\n'
            '{"caption_id_a": "c3", "caption_id_b": "c1", "label": 1, "annotator": "José"}\n'
        ),
    ),
    "epic classes": (
        lambda p: read_epic_classes(p, "noun"),
        ClassFileError,
        "id,key,instances\n0,papér,\"['papér']\"\n",
    ),
    "lexicon": (read_lexicon, ClassFileError, "concept_id\tpos\tlang\tlemma\nn\tnoun\ten\tpapér\n"),
    "eval sentences": (
        read_sentences,
        ClassFileError,
        "narration_id,narration,verb_class,noun_classes\na,cut papér,0,[1]\n",
    ),
    "stop nouns": (read_stop_nouns, StopNounError, "lang\tlemma\nen\tpersoné\n"),
}
SUFFIX = {"manual jsonl": ".jsonl", "conllu": ".conllu", "conllu starting with a word": ".conllu"}


def _path(tmp_path, name):
    return tmp_path / ("file" + SUFFIX.get(name, ".csv"))


@pytest.mark.parametrize("name", READERS)
def test_a_byte_order_mark_is_skipped(tmp_path, name):
    read, _, text = READERS[name]
    path = _path(tmp_path, name)
    path.write_text(text, encoding="utf-8")
    plain = read(path)
    path.write_text(text, encoding="utf-8-sig")
    assert read(path) == plain


@pytest.mark.parametrize("name", READERS)
def test_latin1_is_an_error_naming_file_and_line(tmp_path, name):
    read, error, text = READERS[name]
    path = _path(tmp_path, name)
    path.write_bytes(text.encode("latin-1"))
    line = text[: text.index("é")].count("\n") + 1
    with pytest.raises(error, match=rf"{path}:{line}: not UTF-8 text \(byte 0xe9\); re-save"):
        read(path)


def test_a_bad_byte_after_a_byte_order_mark_is_placed_right(tmp_path):
    from heuristics.text_files import read_text

    path = tmp_path / "a.csv"
    path.write_bytes(b"\xef\xbb\xbfab\nc\xe9\n")  # the BOM's 3 bytes must not shift the count
    with pytest.raises(ValueError, match=rf"{path}:2: not UTF-8 text \(byte 0xe9\)"):
        read_text(path, ValueError)


def test_tag_input_file(tmp_path, lexicon_path, capsys):
    path = tmp_path / "texts.txt"
    path.write_text("cut the paper\n", encoding="utf-8-sig")
    argv = ["tag", "--lang", "en", "--input", str(path), "--tagger", "lexicon"]
    argv += ["--lexicon", str(lexicon_path), "--no-cache"]
    assert main(argv) == 0
    assert '"text": "cut the paper"' in capsys.readouterr().out
    path.write_bytes("cut the papér\n".encode("latin-1"))
    assert main(argv) == 2
    assert f"error: {path}:1: not UTF-8 text (byte 0xe9)" in capsys.readouterr().err
