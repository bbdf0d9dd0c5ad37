"""Turning arbitrary text into URL slugs."""

import re
import unicodedata

# Letters that do not decompose into an ASCII base letter plus combining marks.
_SPECIAL = {
    "ß": "ss",
    "æ": "ae",
    "Æ": "AE",
    "œ": "oe",
    "Œ": "OE",
    "ø": "o",
    "Ø": "O",
    "ł": "l",
    "Ł": "L",
    "đ": "d",
    "Đ": "D",
}

_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def strip_accents(text):
    """Returns ``text`` transliterated to ASCII: accents are removed
    (``"crème"`` -> ``"creme"``), a few special letters are spelled out
    (``"straße"`` -> ``"strasse"``), and anything else non-ASCII is dropped."""
    text = "".join(_SPECIAL.get(c, c) for c in text)
    decomposed = unicodedata.normalize("NFKD", text)
    return decomposed.encode("ascii", "ignore").decode("ascii")


def slugify(text, separator="-", max_length=None, lowercase=True, stopwords=()):
    """Returns a URL slug for ``text``.

    Runs of characters other than ASCII letters and digits become one ``separator``;
    the slug never starts or ends with the separator. ``stopwords`` (compared
    case-insensitively) are left out. With ``max_length``, the slug is cut to at most
    that many characters, at a word boundary when the first word fits, and never
    ends with the separator.
    """
    if not separator:
        raise ValueError("separator must not be empty")
    if max_length is not None and max_length < 0:
        raise ValueError("max_length must not be negative")
    ascii_text = strip_accents(text)
    if lowercase:
        ascii_text = ascii_text.lower()
    stop = {w.lower() for w in stopwords}
    words = [w for w in _NON_ALNUM.split(ascii_text) if w and w.lower() not in stop]
    slug = separator.join(words)
    if max_length is not None and len(slug) > max_length:
        slug = _cut(slug, separator, max_length)
    return slug


def _cut(slug, separator, max_length):
    """Cuts ``slug`` to ``max_length`` characters, preferring a word boundary."""
    head = slug[:max_length]
    # If the cut falls right before a separator, the last word is whole.
    if slug[max_length:].startswith(separator):
        return head.rstrip(separator)
    boundary = head.rfind(separator)
    if boundary > 0:
        return head[:boundary]
    return head.rstrip(separator)
