import unittest

from pyslug import UniqueSlugger, slugify


class ExactFitTest(unittest.TestCase):
    def test_last_word_fits_exactly(self):
        self.assertEqual(slugify("The quick brown fox", max_length=9), "the-quick")

    def test_first_word_fits_exactly(self):
        self.assertEqual(slugify("The quick brown fox", max_length=3), "the")

    def test_multi_character_separator(self):
        self.assertEqual(
            slugify("one two three", separator="--", max_length=8), "one--two"
        )

    def test_longer_limits_are_unchanged(self):
        self.assertEqual(slugify("The quick brown fox", max_length=12), "the-quick")
        self.assertEqual(slugify("The quick brown fox", max_length=19), "the-quick-brown-fox")

    def test_never_longer_than_the_limit(self):
        text = "a bb ccc dddd eeeee ffffff"
        for n in range(0, 30):
            slug = slugify(text, max_length=n)
            self.assertLessEqual(len(slug), n)
            self.assertFalse(slug.endswith("-"), slug)

    def test_unique_slugger_uses_the_limit(self):
        s = UniqueSlugger(max_length=9)
        self.assertEqual(s.slug("The quick brown fox"), "the-quick")
