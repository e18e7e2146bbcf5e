import io
import json
import sys

import pytest

from heuristics.classes import lexicon_entries, read_lexicon
from heuristics.lexicon_tagger import LexiconTagger
from heuristics.nouns_verbs import TaggedWord
from heuristics.taggers import StanzaTagger, TagCache, TaggerError, tag_texts
from rudder.languages import UnsupportedLanguageError


def summary(tagged):
    return [[(w.text, w.lemma, w.upos) for w in words if w.upos != "X"] for words in tagged]


def test_lexicon_tagger_matches_lemmas_and_inflections(lexicon_path):
    tagger = LexiconTagger(lexicon_entries(read_lexicon(lexicon_path)))
    assert summary(tagger.tag(["Cutting the cards.", "Fold paper"], "en")) == [
        [("cutting", "cut", "VERB"), ("cards", "card", "NOUN")],
        [("fold", "fold", "VERB"), ("paper", "paper", "NOUN")],
    ]
    # Hindi: काटिए ~ काटना (common prefix काट, 3 code points >= 5 - 2)
    assert summary(tagger.tag(["कागज़ काटिए।"], "hi")) == [
        [("कागज़", "कागज़", "NOUN"), ("काटिए", "काटना", "VERB")]
    ]
    # "cup" shares only "cu" with "cut": no match; English allows only a 1-letter cut
    assert summary(tagger.tag(["cup", "cards"], "en")) == [[], [("cards", "card", "NOUN")]]


def test_lexicon_tagger_multiword_lemmas_and_learned_forms():
    entries = [("noun", "hi", "कागज़ का कप"), ("noun", "en", "rubber band"), ("verb", "en", "spin")]
    assert summary(LexiconTagger(entries).tag(["spun rubber bands"], "en")) == [
        [("rubber bands", "rubber band", "NOUN")]
    ]
    # "spun" shares only "sp" with "spin": not an inflection, but learned from a caption
    # marked "spin"
    captions = [("en", "The wheel spun.", ["wheel"], ["spin"])]
    tagger = LexiconTagger(entries, captions)
    assert summary(tagger.tag(["Now spun rubber bands"], "en")) == [
        [("spun", "spin", "VERB"), ("rubber bands", "rubber band", "NOUN")]
    ]
    # every word of a multiword lemma may inflect: के ~ का
    assert summary(tagger.tag(["कागज़ के कप को"], "hi")) == [[("कागज़ के कप", "कागज़ का कप", "NOUN")]]


def test_lexicon_tagger_prefers_the_part_of_speech_annotators_marked_more():
    entries = [("noun", "en", "cut"), ("verb", "en", "cut")]
    captions = [("en", "cut it", [], ["cut"]), ("en", "cut more", [], ["cut"])]
    assert summary(LexiconTagger(entries, captions).tag(["cut"], "en")) == [
        [("cut", "cut", "VERB")]
    ]
    assert summary(LexiconTagger(entries).tag(["cut"], "en")) == [[("cut", "cut", "NOUN")]]


class CountingTagger:
    """A fake tagger that records what it was asked to tag."""

    def __init__(self):
        self.calls = []

    def model_id(self, lang):
        return "counting-v1"

    def tag(self, texts, lang):
        self.calls.append(list(texts))
        return [[TaggedWord(t, t.lower(), "NOUN")] for t in texts]


def test_tag_texts_tags_each_text_once_and_caches(tmp_path):
    cache = TagCache(tmp_path / "tags.sqlite")
    tagger = CountingTagger()
    out = tag_texts(tagger, ["A", "B", "A"], "en", cache=cache)
    assert [w[0].lemma for w in out] == ["a", "b", "a"]
    assert tagger.calls == [["A", "B"]]
    again = tag_texts(tagger, ["B", "C"], "en", cache=TagCache(tmp_path / "tags.sqlite"))
    assert tagger.calls == [["A", "B"], ["C"]]  # B came from the disk cache
    assert again[0] == [TaggedWord("B", "b", "NOUN")]
    tag_texts(tagger, ["B"], "hi", cache=cache)  # another language is another key
    assert tagger.calls[-1] == ["B"]


def test_tag_texts_goes_by_batches_with_progress_on_a_terminal(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    tagger = CountingTagger()
    texts = [f"T{k}" for k in range(5)]
    out = tag_texts(tagger, [*texts, "T0"], "en", batch_size=2)
    assert tagger.calls == [["T0", "T1"], ["T2", "T3"], ["T4"]]
    assert [w[0].lemma for w in out] == ["t0", "t1", "t2", "t3", "t4", "t0"]
    assert "tagging en:" in terminal.getvalue()


def test_tag_texts_in_worker_processes(tmp_path, lexicon_path):
    tagger = LexiconTagger(lexicon_entries(read_lexicon(lexicon_path)))
    texts = [f"cut {k} cards" for k in range(40)]
    parallel = tag_texts(tagger, texts, "en", num_proc=2, batch_size=8)
    assert parallel == tagger.tag(texts, "en")


def test_bad_input():
    tagger = CountingTagger()
    with pytest.raises(TaggerError, match=r"caption #1 \(en\) is empty or whitespace only"):
        tag_texts(tagger, ["ok", "  \n"], "en")
    with pytest.raises(UnsupportedLanguageError, match="unsupported language 'xx'"):
        tag_texts(tagger, ["ok"], "xx")
    assert tagger.calls == []


def test_stanza_tagger_without_models(tmp_path):
    with pytest.raises(TaggerError, match="does not exist"):
        StanzaTagger(tmp_path / "absent")
    (tmp_path / "models").mkdir()
    tagger = StanzaTagger(tmp_path / "models")
    with pytest.raises(
        TaggerError, match=r"no Stanza POS/lemma model for 'mr'.*train-tagger --lang mr"
    ):
        tagger.tag(["घर"], "mr")
    # a trained folder that lost its lemmatizer
    (tmp_path / "models" / "mr" / "pos").mkdir(parents=True)
    (tmp_path / "models" / "mr" / "pos" / "default.pt").write_bytes(b"x")
    (tmp_path / "models" / "mr" / "rudder_tagger.json").write_text(json.dumps({"lang": "mr"}))
    with pytest.raises(TaggerError, match=r"the lemma model of 'mr' is missing"):
        tagger.model_id("mr")


@pytest.mark.parametrize("own", [False, True], ids=["official", "train-tagger"])
def test_a_model_replaced_at_the_same_size_gets_a_new_id(tmp_path, own):
    """The id keys the tag cache: a retrained model copied over the old one (same size)
    must not read the old model's tags (official ids hashed only the sizes)."""
    for name in ("pos", "lemma"):
        (tmp_path / "en" / name).mkdir(parents=True)
        (tmp_path / "en" / name / "default.pt").write_bytes(b"A" * 100)
    (tmp_path / "resources.json").write_text('{"en": {}}')
    if own:
        (tmp_path / "en" / "rudder_tagger.json").write_text('{"lang": "en"}')
    before = StanzaTagger(tmp_path).model_id("en")
    (tmp_path / "en" / "pos" / "default.pt").write_bytes(b"B" * 100)
    assert StanzaTagger(tmp_path).model_id("en") != before


@pytest.mark.parametrize("own", [False, True], ids=["official", "train-tagger"])
def test_eval_tagger_takes_a_language_folder(tmp_path, own):
    """--model-dir DIR/<lang> works for official folders too (only train-tagger's did)."""
    from heuristics.commands import _model_and_lang

    (tmp_path / "en" / "pos").mkdir(parents=True)
    (tmp_path / "resources.json").write_text("{}" if own else '{"en": {}}')
    if own:
        (tmp_path / "en" / "rudder_tagger.json").write_text('{"lang": "en"}')
    assert _model_and_lang(tmp_path / "en", None) == (tmp_path, "en")
    assert _model_and_lang(tmp_path, None) == (tmp_path, "en")


def test_model_dir_flag_then_env_then_one_default(tmp_path, monkeypatch):
    from heuristics.taggers import model_dir

    monkeypatch.delenv("STANZA_RESOURCES_DIR", raising=False)
    monkeypatch.setenv("RUDDER_CACHE", str(tmp_path / "cache"))
    assert model_dir() == tmp_path / "cache" / "stanza"
    monkeypatch.setenv("STANZA_RESOURCES_DIR", str(tmp_path / "env"))
    assert model_dir(None) == tmp_path / "env"
    assert model_dir(tmp_path / "flag") == tmp_path / "flag"
    assert StanzaTagger.__init__.__defaults__ == (None,)  # the tagger resolves the same way
    (tmp_path / "env").mkdir()
    assert StanzaTagger().model_dir == tmp_path / "env"
