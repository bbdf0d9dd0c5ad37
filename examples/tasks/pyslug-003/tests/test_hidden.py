import unittest

from pyslug import UniqueSlugger


class NoDuplicatesTest(unittest.TestCase):
    def test_literal_suffix_is_skipped(self):
        s = UniqueSlugger()
        got = [s.slug(t) for t in ["Hello 2", "Hello", "Hello"]]
        self.assertEqual(got, ["hello-2", "hello", "hello-3"])

    def test_existing_suffixed_slugs_are_skipped(self):
        s = UniqueSlugger(existing={"hello", "hello-2"})
        self.assertEqual(s.slug("Hello"), "hello-3")

    def test_numbering_is_still_sequential(self):
        s = UniqueSlugger()
        self.assertEqual([s.slug("a") for _ in range(4)], ["a", "a-2", "a-3", "a-4"])

    def test_released_numbers_are_reused(self):
        s = UniqueSlugger()
        for _ in range(3):
            s.slug("Post")
        s.release("post-2")
        self.assertEqual(s.slug("Post"), "post-2")

    def test_never_a_duplicate(self):
        s = UniqueSlugger(existing={"x-3", "x-5"})
        titles = ["X", "x 2", "X", "X", "x-4", "X", "X", "X 7", "X", "X"]
        slugs = [s.slug(t) for t in titles]
        self.assertEqual(len(slugs), len(set(slugs)), slugs)
        self.assertFalse({"x-3", "x-5"} & set(slugs))
