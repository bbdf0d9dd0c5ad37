"""Slugs that are unique within a collection."""

from .slugify import slugify


class UniqueSlugger:
    """Hands out slugs that are unique among those it has handed out (and any
    ``existing`` ones given at construction).

    The first ``"Hello"`` gets ``"hello"``, the next ones ``"hello-2"``,
    ``"hello-3"``... A suffixed candidate that is already taken (for instance
    because a title literally was ``"Hello 2"``) is skipped.
    """

    def __init__(self, existing=(), separator="-", **slug_options):
        self.separator = separator
        self.slug_options = slug_options
        self._taken = set(existing)

    def __contains__(self, slug):
        return slug in self._taken

    def __len__(self):
        return len(self._taken)

    def slug(self, text):
        """Returns a new unique slug for ``text`` and records it as taken."""
        base = slugify(text, separator=self.separator, **self.slug_options) or "n-a"
        candidate = base
        n = 1
        while candidate in self._taken:
            n += 1
            candidate = f"{base}{self.separator}{n}"
        self._taken.add(candidate)
        return candidate

    def release(self, slug):
        """Forgets ``slug`` so that it can be handed out again."""
        self._taken.discard(slug)
