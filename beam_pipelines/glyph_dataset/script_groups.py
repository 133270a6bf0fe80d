"""The catalogue's raw material: Unicode scripts and blocks the bundled fonts really cover.

Each group is cut into alphabets whose sizes vary like Omniglot's (14 to 55 characters);
`glyph_selection` picks the distinct, visible glyphs of each group.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from beam_pipelines.glyph_dataset.fonts import FAMILIES

__all__ = ["MAX_ALPHABET_SIZE", "MIN_ALPHABET_SIZE", "SCRIPT_GROUPS", "ScriptGroup"]

MAX_ALPHABET_SIZE = 55  # the largest Omniglot alphabet (Tifinagh) has 55 characters
MIN_ALPHABET_SIZE = 14  # the smallest Omniglot alphabets (Blackfoot, Ojibwe) have 14


def _span(first: int, last: int) -> list[int]:
    return list(range(first, last + 1))


def _named(first: int, last: int, *, has: str = "", lacks: Sequence[str] = ()) -> list[int]:
    """Codepoints of a range whose Unicode name contains `has` and none of `lacks`."""
    out = []
    for cp in range(first, last + 1):
        name = unicodedata.name(chr(cp), "")
        if has in name and not any(word in name for word in lacks):
            out.append(cp)
    return out


@dataclass(frozen=True)
class ScriptGroup:
    """A Unicode script or block, cut into alphabets of the given sizes (upper bounds).

    Distinct glyphs are thinned evenly over the block to sum(sizes), then cut in codepoint
    order, so each alphabet holds related shapes. Sizes vary like Omniglot's (14 to 55).
    """

    name: str
    codepoints: tuple[int, ...]
    letters_only: bool = False  # letters without diacritic variants ("... WITH ACUTE")
    sizes: tuple[int, ...] = (MAX_ALPHABET_SIZE,)
    families: tuple[str, ...] = FAMILIES  # font families whose designs of the block agree


def _group(
    name: str,
    cps: Iterable[int],
    letters: bool = False,
    sizes: Sequence[int] = (55,),
    families: Sequence[str] = FAMILIES,
) -> ScriptGroup:
    return ScriptGroup(name, tuple(cps), letters, tuple(sizes), tuple(families))


_CANADIAN = 0x1400, 0x167F
# Blocks whose designs differ between font families (DejaVu Serif's Georgian, STIX's
# calligraphic letters) are drawn from one family only, so every drawer writes the same letter.
_SANS = ("sans",)
_STIX = ("stix",)
_FRAKTUR_HOLES = [0x212D, 0x210C, 0x2111, 0x211C, 0x2128]
_SCRIPT_HOLES = [0x212C, 0x2130, 0x2131, 0x210B, 0x2110, 0x2112, 0x2133, 0x211B, 0x212F, 0x210A]
_DOUBLE_STRUCK_HOLES = [0x2102, 0x210D, 0x2115, 0x2119, 0x211A, 0x211D, 0x2124]

# Order matters twice: earlier groups win duplicate shapes (Latin keeps "A", Greek loses its
# Alpha), and `--alphabets N` takes the first N alphabets, so scripts and symbol sets alternate.
SCRIPT_GROUPS: tuple[ScriptGroup, ...] = (
    _group("Latin", _span(0x41, 0x5A), letters=True),
    _group("Latin_Minuscule", _span(0x61, 0x7A), letters=True),
    _group("Greek", _span(0x391, 0x3A9) + _span(0x3B1, 0x3C9), letters=True),
    _group("Cyrillic", _span(0x410, 0x44F), letters=True),
    _group("Hebrew", _span(0x5D0, 0x5EA), letters=True),
    _group("Arabic", _span(0x621, 0x64A), letters=True),
    _group("Armenian", _span(0x531, 0x556), letters=True),
    _group("Mkhedruli_(Georgian)", _span(0x10D0, 0x10FA), letters=True, families=_SANS),
    _group("Braille", _span(0x2801, 0x283F)),
    _group("Tifinagh", _span(0x2D30, 0x2D6F), letters=True),
    _group("N_Ko", _span(0x7C0, 0x7EA)),
    _group("Ogham", _span(0x1681, 0x169A), letters=True),
    _group("Asomtavruli_(Georgian)", _span(0x10A0, 0x10C5), letters=True, families=_SANS),
    _group("Mathematical_Operators", _span(0x2200, 0x22FF) + _span(0x2A00, 0x2AFF), sizes=(55, 18)),
    _group("Lao", _span(0xE81, 0xEDF)),
    _group(
        "Canadian_Syllabics",
        _named(*_CANADIAN, lacks=("CARRIER",)),
        letters=True,
        sizes=(52, 14, 30, 21),
    ),
    _group(
        "Cyrillic_Extended",
        _span(0x400, 0x40F) + _span(0x450, 0x52F) + _span(0xA640, 0xA69F),
        letters=True,
        sizes=(48, 17),
    ),
    _group(
        "Arrows",
        _span(0x2190, 0x21FF)
        + _span(0x27F0, 0x27FF)
        + _span(0x2900, 0x297F)
        + _span(0x2B00, 0x2BFF),
        sizes=(16, 45, 24),
    ),
    _group("IPA", _span(0x250, 0x2AF), letters=True, sizes=(47,)),
    _group("Fraktur", _span(0x1D504, 0x1D537) + _FRAKTUR_HOLES, sizes=(40,), families=_STIX),
    _group("Nuskhuri_(Georgian)", _span(0x2D00, 0x2D25), letters=True, families=_SANS),
    _group("Geometric_Shapes", _span(0x25A0, 0x25FF), sizes=(20,)),
    _group("Armenian_Minuscule", _span(0x561, 0x587), letters=True),
    _group("Greek_Archaic_and_Coptic", _span(0x370, 0x377) + _span(0x3CF, 0x3FF), letters=True),
    _group("Dingbats", _span(0x2700, 0x27BF), sizes=(55, 20)),
    _group("Old_Italic", _span(0x10300, 0x1032F), letters=True),
    _group("Box_Drawing", _span(0x2500, 0x257F), sizes=(14,)),
    _group("Script", _span(0x1D49C, 0x1D4CF) + _SCRIPT_HOLES, sizes=(40,), families=_STIX),
    _group("Lisu", _span(0xA4D0, 0xA4FF), letters=True),
    _group(
        "Latin_Extended",
        _span(0x180, 0x24F) + _span(0x1D00, 0x1D2B) + _span(0x2C60, 0x2C7F) + _span(0xA720, 0xA7FF),
        letters=True,
        sizes=(24, 40),
    ),
    _group("Technical_Symbols", _span(0x2300, 0x23FF), sizes=(25,)),
    _group(
        "Numerals",
        _span(0x30, 0x39)
        + _span(0x660, 0x669)
        + _span(0x6F0, 0x6F9)
        + _span(0x7C0, 0x7C9)
        + _span(0xED0, 0xED9),
    ),
    _group(
        "Arabic_Extended",
        _span(0x671, 0x6D3) + _span(0x6FA, 0x6FF) + _span(0x750, 0x77F),
        letters=True,
    ),
    _group("Miscellaneous_Symbols", _span(0x2600, 0x26FF), sizes=(36, 18)),
    _group(
        "Double-Struck",
        _span(0x1D538, 0x1D56B) + _DOUBLE_STRUCK_HOLES,
        sizes=(40,),
        families=_STIX,
    ),
    _group("Currency_Symbols", _span(0x20A0, 0x20CF)),
    _group("Emoticons", _span(0x1F600, 0x1F64F), sizes=(22,)),
    _group("Letterlike_Symbols", _span(0x2100, 0x214F), sizes=(17,)),
    _group("Arabic_Contextual_Forms", _span(0xFE80, 0xFEFC), letters=True, sizes=(36,)),
    _group("Braille_Extended", _span(0x2840, 0x28FF), sizes=(20,)),
    _group("Tai_Xuan_Jing", _span(0x1D300, 0x1D356), sizes=(30,)),
)
