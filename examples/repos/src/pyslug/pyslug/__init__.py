"""URL slugs and identifier case conversion, standard library only."""

from .slugify import slugify, strip_accents
from .unique import UniqueSlugger
from .case import camel_to_snake, snake_to_camel

__all__ = [
    "slugify",
    "strip_accents",
    "UniqueSlugger",
    "camel_to_snake",
    "snake_to_camel",
]
__version__ = "0.4.0"
