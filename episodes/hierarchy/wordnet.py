"""WordNet noun synsets and their is-a links, from WordNet 3.0 or ImageNet's own files.

Two readers give the same `WordNet` object:
- `read_wordnet(dir)`: Princeton's `data.noun` as Debian's `wordnet-base` installs it
  (/usr/share/wordnet). Synset ids are 'n%08d' of the byte offset, which is exactly the
  ImageNet / ILSVRC-2012 id; is-a links are the hypernym '@' and instance hypernym '@i'
  pointers; words are the synset's lemmas (underscores as spaces) joined by ', '.
- `read_imagenet_is_a(is_a, words)`: ImageNet's `wordnet.is_a.txt` ("parent child" per line)
  and `words.txt` ("wnid<TAB>words"), the files the reference Meta-Dataset converter reads.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from episodes.util.cli_errors import UserError

__all__ = [
    "DEFAULT_WORDNET_DIR",
    "HYPERNYM",
    "INSTANCE_HYPERNYM",
    "WordNet",
    "WordNetError",
    "parse_data_noun_line",
    "read_imagenet_is_a",
    "read_wordnet",
    "write_imagenet_is_a",
]

DEFAULT_WORDNET_DIR = Path("/usr/share/wordnet")
HYPERNYM = "@"
INSTANCE_HYPERNYM = "@i"


class WordNetError(UserError, ValueError):
    """A WordNet file that is missing or not in the expected format."""


@dataclass(frozen=True)
class WordNet:
    """Noun synsets by WordNet id ('n%08d'): their words and is-a parents."""

    words: Mapping[str, str]
    parents: Mapping[str, tuple[str, ...]]
    source: str = ""
    _children: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False, compare=False)

    def __contains__(self, wn_id: object) -> bool:
        return wn_id in self.words

    def __len__(self) -> int:
        return len(self.words)

    def children(self, wn_id: str) -> tuple[str, ...]:
        """Direct hyponyms (is-a children) of a synset, sorted."""
        if not self._children:
            found: dict[str, list[str]] = {}
            for child, parents in self.parents.items():
                for parent in parents:
                    found.setdefault(parent, []).append(child)
            self._children.update({p: tuple(sorted(c)) for p, c in found.items()})
        return self._children.get(wn_id, ())

    def ancestors(self, wn_ids: Iterable[str]) -> set[str]:
        """All strict ancestors (transitive parents) of the given synsets."""
        seen: set[str] = set()
        stack = [p for wn_id in wn_ids for p in self.parents.get(wn_id, ())]
        while stack:
            wn_id = stack.pop()
            if wn_id not in seen:
                seen.add(wn_id)
                stack.extend(self.parents.get(wn_id, ()))
        return seen

    def unknown(self, wn_ids: Iterable[str]) -> list[str]:
        """The ids among `wn_ids` that name no synset, sorted."""
        return sorted(w for w in set(wn_ids) if w not in self.words)


def parse_data_noun_line(line: str) -> tuple[str, str, tuple[str, ...]] | None:
    """(wn_id, words, is-a parent ids) of one `data.noun` line; None for license lines.

    Format (wndb(5)): offset lex_filenum ss_type w_cnt(hex) [word lex_id]... p_cnt(dec)
    [pointer_symbol offset pos source/target]... | gloss."""
    if not line or line.startswith(" "):
        return None
    fields = line.split(" | ", 1)[0].split()
    try:
        offset, ss_type, w_cnt = fields[0], fields[2], int(fields[3], 16)
        words = [fields[4 + 2 * i].replace("_", " ") for i in range(w_cnt)]
        p_at = 4 + 2 * w_cnt
        p_cnt = int(fields[p_at])
        parents = []
        for i in range(p_cnt):
            symbol, target, pos = fields[p_at + 1 + 4 * i : p_at + 4 + 4 * i]
            if symbol in (HYPERNYM, INSTANCE_HYPERNYM) and pos == "n":
                parents.append(f"n{target}")
    except (IndexError, ValueError) as exc:
        raise WordNetError(f"malformed data.noun line {line[:60]!r} ({exc})") from None
    if ss_type != "n" or not offset.isdigit():
        raise WordNetError(f"not a noun synset line: {line[:60]!r}")
    return f"n{offset}", ", ".join(words), tuple(sorted(set(parents)))


@lru_cache(maxsize=4)
def _read_data_noun(path: str, mtime_ns: int) -> WordNet:
    words: dict[str, str] = {}
    parents: dict[str, tuple[str, ...]] = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            parsed = parse_data_noun_line(line.rstrip("\n"))
            if parsed is None:
                continue
            wn_id, synset_words, synset_parents = parsed
            words[wn_id] = synset_words
            if synset_parents:
                parents[wn_id] = synset_parents
    if not words:
        raise WordNetError(f"{path}: no noun synsets found; expected WordNet's data.noun")
    return WordNet(words, parents, source=path)


def read_wordnet(directory: str | os.PathLike = DEFAULT_WORDNET_DIR) -> WordNet:
    """Noun synsets of the WordNet database in `directory` (the folder holding data.noun,
    or its `dict/` parent). Parsed once per process and file version."""
    directory = Path(directory)
    candidates = [directory / "data.noun", directory / "dict" / "data.noun"]
    if directory.is_file() and directory.name == "data.noun":
        candidates.insert(0, directory)
    for path in candidates:
        if path.is_file():
            return _read_data_noun(str(path.resolve()), path.stat().st_mtime_ns)
    raise WordNetError(
        f"{directory}: no data.noun found; expected a WordNet 3.0 database folder "
        f"(Debian/Ubuntu: apt-get install wordnet-base, which installs {DEFAULT_WORDNET_DIR})"
    )


def read_imagenet_is_a(is_a_path: str | os.PathLike, words_path: str | os.PathLike) -> WordNet:
    """ImageNet's `wordnet.is_a.txt` (one 'parent child' pair per line) and `words.txt`
    (one 'wnid<TAB>words' per line)."""
    is_a_path, words_path = Path(is_a_path), Path(words_path)
    for path in (is_a_path, words_path):
        if not path.is_file():
            raise WordNetError(
                f"{path}: not found; expected ImageNet's wordnet.is_a.txt and words.txt"
            )
    words: dict[str, str] = {}
    with open(words_path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            wn_id, sep, text = line.partition("\t")
            if not sep or not _is_wnid(wn_id):
                raise WordNetError(
                    f"{words_path}:{number}: {line[:60]!r}; expected 'nXXXXXXXX<TAB>words'"
                )
            words[wn_id] = text.strip()
    found: dict[str, set[str]] = {}
    with open(is_a_path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            pair = line.split()
            if not pair:
                continue
            if len(pair) != 2 or not all(_is_wnid(p) for p in pair):
                raise WordNetError(
                    f"{is_a_path}:{number}: {line.strip()[:60]!r}; "
                    "expected 'parent_wnid child_wnid'"
                )
            parent, child = pair
            found.setdefault(child, set()).add(parent)
    unknown = sorted({w for child, ps in found.items() for w in (child, *ps) if w not in words})
    if unknown:
        raise WordNetError(
            f"{is_a_path}: {len(unknown)} synsets have no entry in {words_path}, e.g. {unknown[:3]}"
        )
    parents = {child: tuple(sorted(ps)) for child, ps in found.items()}
    return WordNet(words, parents, source=f"{is_a_path} + {words_path}")


def write_imagenet_is_a(
    wordnet: WordNet, is_a_path: str | os.PathLike, words_path: str | os.PathLike
) -> None:
    """Write `wordnet` in ImageNet's is_a.txt / words.txt format (sorted, deterministic)."""
    with open(is_a_path, "w", encoding="utf-8") as handle:
        for child in sorted(wordnet.parents):
            for parent in wordnet.parents[child]:
                handle.write(f"{parent} {child}\n")
    with open(words_path, "w", encoding="utf-8") as handle:
        for wn_id in sorted(wordnet.words):
            handle.write(f"{wn_id}\t{wordnet.words[wn_id]}\n")


def _is_wnid(text: str) -> bool:
    return len(text) == 9 and text[0] == "n" and text[1:].isdigit()
