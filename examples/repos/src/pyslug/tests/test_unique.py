import unittest

from pyslug import UniqueSlugger


class UniqueSluggerTest(unittest.TestCase):
    def test_first_slug_is_plain(self):
        s = UniqueSlugger()
        self.assertEqual(s.slug("Hello World"), "hello-world")

    def test_duplicates_are_numbered_from_two(self):
        s = UniqueSlugger()
        self.assertEqual(
            [s.slug("Hello") for _ in range(3)], ["hello", "hello-2", "hello-3"]
        )

    def test_existing_slugs_are_taken(self):
        s = UniqueSlugger(existing={"hello"})
        self.assertEqual(s.slug("Hello"), "hello-2")

    def test_release(self):
        s = UniqueSlugger()
        s.slug("Hello")
        s.release("hello")
        self.assertNotIn("hello", s)
        self.assertEqual(s.slug("Hello"), "hello")

    def test_empty_title_gets_placeholder(self):
        s = UniqueSlugger()
        self.assertEqual(s.slug("???"), "n-a")
        self.assertEqual(len(s), 1)

    def test_options_are_passed_on(self):
        s = UniqueSlugger(separator="_", max_length=5)
        self.assertEqual(s.slug("Hello World"), "hello")
        self.assertEqual(s.slug("Hello There"), "hello_2")


if __name__ == "__main__":
    unittest.main()
