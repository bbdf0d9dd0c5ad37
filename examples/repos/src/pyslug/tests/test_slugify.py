import unittest

from pyslug import slugify, strip_accents


class StripAccentsTest(unittest.TestCase):
    def test_plain_ascii_is_unchanged(self):
        self.assertEqual(strip_accents("Hello, World"), "Hello, World")

    def test_special_letters(self):
        self.assertEqual(strip_accents("Straße"), "Strasse")
        self.assertEqual(strip_accents("Łukasz"), "Lukasz")

    def test_unknown_scripts_are_dropped(self):
        self.assertEqual(strip_accents("abc日本"), "abc")


class SlugifyTest(unittest.TestCase):
    def test_basic(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")

    def test_collapses_and_strips_separators(self):
        self.assertEqual(slugify("  --Hello---World--  "), "hello-world")

    def test_digits_are_kept(self):
        self.assertEqual(slugify("Top 10 tips (2024)"), "top-10-tips-2024")

    def test_custom_separator(self):
        self.assertEqual(slugify("Hello World", separator="_"), "hello_world")

    def test_empty_separator_is_refused(self):
        with self.assertRaises(ValueError):
            slugify("x", separator="")

    def test_keep_case(self):
        self.assertEqual(slugify("Hello World", lowercase=False), "Hello-World")

    def test_stopwords(self):
        self.assertEqual(
            slugify("The Lord of the Rings", stopwords=("the", "of")), "lord-rings"
        )

    def test_nothing_left(self):
        self.assertEqual(slugify("!!!"), "")
        self.assertEqual(slugify(""), "")

    def test_max_length_keeps_short_slugs(self):
        self.assertEqual(slugify("hello world", max_length=50), "hello-world")

    def test_max_length_cuts_at_word_boundary(self):
        self.assertEqual(slugify("the quick brown fox", max_length=12), "the-quick")

    def test_max_length_cuts_a_single_long_word(self):
        self.assertEqual(slugify("incomprehensibilities", max_length=6), "incomp")

    def test_negative_max_length_is_refused(self):
        with self.assertRaises(ValueError):
            slugify("x", max_length=-1)


if __name__ == "__main__":
    unittest.main()
