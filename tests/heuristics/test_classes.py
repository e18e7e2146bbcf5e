import pytest

from heuristics.classes import ClassFileError, ClassMap, read_epic_classes, read_lexicon

EPIC_CSV = """id,key,instances,category
0,tap,"['tap', 'tap:water', 'water:tap']",appliances
1,spoon,"['spoon', 'teaspoon']",cutlery
"""
EPIC_VERBS = """id,key,instances,category
0,take,"['take', 'pick-up', 'grab']",retrieve
""" + "".join(f"{i},zzfill{i},\"['zzfill{i}']\",other\n" for i in range(1, 6)) + """\
6,turn-on,"['turn-on', 'switch-on']",manipulate
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_epic_csv_maps_key_and_instances(tmp_path):
    nouns = read_epic_classes(write(tmp_path, "n.csv", EPIC_CSV), "noun")
    assert nouns.lookup("noun", "en", "tap:water") == "0"
    assert nouns.lookup("noun", "en", "teaspoon") == "1"
    assert len(nouns) == 5  # tap, tap:water, water:tap, spoon, teaspoon


def test_backoff_and_singletons(tmp_path):
    classes = read_epic_classes(write(tmp_path, "n.csv", EPIC_CSV), "noun")
    classes.update(read_epic_classes(write(tmp_path, "v.csv", EPIC_VERBS), "verb"))
    # compound known -> its class; unknown compound backs off to the head; unknown head -> singleton
    assert classes.classes("noun", "en", ["tap:water", "tap:kitchen", "sink:kitchen"]) == [
        "0",
        "noun:en:sink",
    ]
    # phrasal verbs: known as a whole (turn-on), or backing off to the verb (take-into -> take)
    assert classes.classes("verb", "en", ["turn-on", "take-into", "turn"]) == [
        "6",
        "0",
        "verb:en:turn",
    ]
    assert classes.classes("noun", "hi", ["tap"]) == ["noun:hi:tap"]  # the EPIC lists are English
    # an unknown head falls back to the modifiers, nearest it first ("tap again": again:tap)
    assert classes.classes("noun", "en", ["again:tap"]) == ["0"]
    assert classes.classes("noun", "en", ["again:teaspoon:tap"]) == ["0"]
    assert classes.classes("noun", "en", ["again:sink"]) == ["noun:en:again"]


def test_real_epic_class_files(shared_data):
    nouns = read_epic_classes(shared_data / "epic100" / "EPIC_100_noun_classes.csv", "noun")
    verbs = read_epic_classes(shared_data / "epic100" / "EPIC_100_verb_classes.csv", "verb")
    assert len(set(nouns.entries.values())) == 300 and len(set(verbs.entries.values())) == 97
    assert nouns.lookup("noun", "en", "tap:water") == "0"
    assert verbs.lookup("verb", "en", "pick-up") == "0"
    assert verbs.lookup("verb", "en", "turn-on") == "6"


def test_a_whole_last_line_without_a_line_end_is_fine(tmp_path):
    """EPIC's own class files end without a newline."""
    text = EPIC_CSV.rstrip("\n").replace("cutlery", "appliances")
    assert read_epic_classes(write(tmp_path, "n.csv", text), "noun").lookup(
        "noun", "en", "spoon") == "1"
    cut = EPIC_CSV.rstrip("\n")[:-3]  # a category no other row has: refused, see below
    with pytest.raises(ClassFileError, match="cut mid-row"):
        read_epic_classes(write(tmp_path, "m.csv", cut), "noun")


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "ident,key,instances\n0,tap,\"['tap']\"\n",
            r"n.csv:1: expected the header 'id,key,instances",
        ),
        ("id,key,instances\n0,tap,\"['tap'\"\n", r"n.csv:2: instances must be a list literal"),
        ("id,key,instances\n0,tap\n", r"n.csv:2: expected at least 3 columns"),
        (
            "id,key,instances\n0,tap,\"['tap']\"\n1,cup,\"['', 'cup']\"\n",
            r"n.csv:3: instances must be a list of non-empty",
        ),
        (
            "id,key,instances\n0,tap,\"['tap']\"\n1,faucet,\"['tap']\"\n",
            r"n.csv:3: noun 'tap' \(en\) maps to class '1', but .*n.csv:2 maps it to '0'",
        ),
        (  # ids with a gap (a deleted row)
            "id,key,instances\n0,tap,\"['tap']\"\n2,cup,\"['cup']\"\n",
            r"n.csv: class ids are not contiguous: 1 is missing between 0 and 2",
        ),
        (
            "id,key,instances\n0,tap,\"['tap']\"\n0,cup,\"['cup']\"\n",
            r"n.csv:3: class id '0' is also on line 2",
        ),
        (  # head -c: cut inside the category of the last row
            EPIC_CSV.rstrip("\n")[:-3],
            r"n.csv:3: the last line looks cut mid-row .* 'cutl' is on no other row",
        ),
    ],
)
def test_malformed_class_csv(tmp_path, text, message):
    with pytest.raises(ClassFileError, match=message):
        read_epic_classes(write(tmp_path, "n.csv", text), "noun")


def test_lexicon_tsv(tmp_path, lexicon_path):
    classes = read_lexicon(lexicon_path)
    assert (
        classes.classes("verb", "hi", ["काटना"])
        == classes.classes("verb", "en", ["cut"])
        == ["v:cut"]
    )
    two_words = write(
        tmp_path, "l.tsv", "concept_id\tpos\tlang\tlemma\nn:cup\tnoun\ten\tpaper cup\n"
    )
    # the English multiword noun is also known in the compound form the extraction makes
    assert read_lexicon(two_words).classes("noun", "en", ["cup:paper", "paper cup"]) == ["n:cup"]


@pytest.mark.parametrize(
    "body, message",
    [
        ("n:a\tnoun\ten\n", r"l.tsv:2: expected 4 tab-separated columns, got 3"),
        ("n:a\tadj\ten\tred\n", r"l.tsv:2: pos must be 'noun' or 'verb'"),
        ("n:a\tnoun\tfr\trouge\n", r"l.tsv:2: unsupported language 'fr'"),
        ("\tnoun\ten\tred\n", r"l.tsv:2: empty concept_id or lemma"),
    ],
)
def test_malformed_lexicon(tmp_path, body, message):
    with pytest.raises(ClassFileError, match=message):
        read_lexicon(write(tmp_path, "l.tsv", "concept_id\tpos\tlang\tlemma\n" + body))
    with pytest.raises(ClassFileError, match=r"l2.tsv:1: expected the header"):
        read_lexicon(write(tmp_path, "l2.tsv", "id\tpos\tlang\tlemma\n"))


def test_sample_lexicon_loads():
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "rudder" / "data" / "sample_lexicon.tsv"
    if not path.is_file():
        pytest.skip("rudder/data/sample_lexicon.tsv is not there")
    classes = read_lexicon(path)
    assert (
        classes.lookup("noun", "mr", "बाटली")
        == classes.lookup("noun", "en", "bottle")
        == "n:bottle"
    )


def test_unknown_pos():
    with pytest.raises(ValueError, match="pos must be one of"):
        ClassMap().classes("adjective", "en", ["red"])
