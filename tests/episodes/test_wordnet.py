"""WordNet readers: Princeton data.noun lines, the installed WordNet 3.0, ImageNet's is_a/words."""

from __future__ import annotations

import pytest

from episodes.hierarchy.wordnet import (
    WordNet,
    WordNetError,
    parse_data_noun_line,
    read_imagenet_is_a,
    read_wordnet,
    write_imagenet_is_a,
)

LINE = (
    "02084071 05 n 02 dog 0 domestic_dog 0 004 @ 02083346 n 0000 @i 01317541 n 0000 "
    "~ 01322604 n 0000 + 01779165 v 0101 | a member of the genus Canis  "
)


def test_parse_data_noun_line_words_and_isa_pointers():
    wn_id, words, parents = parse_data_noun_line(LINE)
    assert wn_id == "n02084071"
    assert words == "dog, domestic dog"
    # Hypernym '@' and instance hypernym '@i' are is-a links; hyponyms and verb links are not.
    assert parents == ("n01317541", "n02083346")


def test_parse_data_noun_line_skips_license_and_rejects_garbage():
    assert parse_data_noun_line("  1 This software and database is being provided") is None
    with pytest.raises(WordNetError, match="malformed data.noun line"):
        parse_data_noun_line("02084071 05 n 0z dog")
    with pytest.raises(WordNetError, match="not a noun synset"):
        parse_data_noun_line("00001740 03 v 01 entity 0 000 | gloss")


def test_installed_wordnet_30():
    wordnet = read_wordnet()
    assert len(wordnet) == 82115  # WordNet 3.0 noun synsets
    assert wordnet.words["n00001740"] == "entity"
    assert "n00001740" not in wordnet.parents  # the single root of the noun hierarchy
    assert wordnet.words["n00002137"] == "abstraction, abstract entity"
    assert wordnet.parents["n02075296"] == ("n01886756",)  # carnivore is-a placental
    assert "n01886756" in wordnet.ancestors(["n02085620"])  # Chihuahua is a placental
    assert "n02085620" in wordnet.children("n02085374")  # toy dog -> Chihuahua
    roots = {w for w in wordnet.words if w not in wordnet.parents}
    assert roots == {"n00001740"}
    assert read_wordnet() is wordnet  # parsed once per process


def test_missing_wordnet_folder_names_the_path(tmp_path):
    with pytest.raises(WordNetError, match=f"{tmp_path}: no data.noun found.*wordnet-base"):
        read_wordnet(tmp_path)


def test_wordnet_folder_with_dict_subfolder(tmp_path):
    (tmp_path / "dict").mkdir()
    (tmp_path / "dict" / "data.noun").write_text(
        "  1 license header line\n"
        "00001740 03 n 01 entity 0 000 | root  \n"
        "00001930 03 n 01 physical_entity 0 001 @ 00001740 n 0000 | child  \n"
    )
    wordnet = read_wordnet(tmp_path)
    assert dict(wordnet.words) == {"n00001740": "entity", "n00001930": "physical entity"}
    assert dict(wordnet.parents) == {"n00001930": ("n00001740",)}


def test_imagenet_is_a_round_trip(tmp_path):
    small = WordNet(
        words={"n00000001": "root", "n00000002": "a, b", "n00000003": "c", "n00000004": "d"},
        parents={
            "n00000002": ("n00000001",),
            "n00000003": ("n00000001",),
            "n00000004": ("n00000002", "n00000003"),
        },
    )
    is_a, words = tmp_path / "wordnet.is_a.txt", tmp_path / "words.txt"
    write_imagenet_is_a(small, is_a, words)
    assert is_a.read_text().splitlines()[0] == "n00000001 n00000002"
    assert words.read_text().splitlines()[1] == "n00000002\ta, b"
    again = read_imagenet_is_a(is_a, words)
    assert dict(again.words) == dict(small.words)
    assert dict(again.parents) == dict(small.parents)


def test_imagenet_is_a_errors(tmp_path):
    is_a, words = tmp_path / "wordnet.is_a.txt", tmp_path / "words.txt"
    with pytest.raises(WordNetError, match="words.txt: not found|is_a.txt: not found"):
        read_imagenet_is_a(is_a, words)
    words.write_text("n00000001\troot\n")
    is_a.write_text("n00000001 n00000002\n")
    with pytest.raises(WordNetError, match=r"1 synsets have no entry in .*words.txt.*n00000002"):
        read_imagenet_is_a(is_a, words)
    is_a.write_text("n00000001\n")
    with pytest.raises(WordNetError, match=r"is_a.txt:1: .*expected 'parent_wnid child_wnid'"):
        read_imagenet_is_a(is_a, words)
    words.write_text("entity root\n")
    with pytest.raises(WordNetError, match=r"words.txt:1: .*expected 'nXXXXXXXX<TAB>words'"):
        read_imagenet_is_a(is_a, words)
