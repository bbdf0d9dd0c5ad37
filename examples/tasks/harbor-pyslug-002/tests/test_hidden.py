import unittest

from pyslug import slugify, strip_accents


class AccentsTest(unittest.TestCase):
    def test_french(self):
        self.assertEqual(slugify("Crème brûlée"), "creme-brulee")

    def test_portuguese(self):
        self.assertEqual(slugify("São Paulo"), "sao-paulo")

    def test_strip_accents_keeps_base_letters(self):
        self.assertEqual(strip_accents("naïve café"), "naive cafe")
        self.assertEqual(strip_accents("Ångström"), "Angstrom")

    def test_compatibility_characters(self):
        self.assertEqual(slugify("ﬁnal ﬁle"), "final-file")

    def test_decomposed_input(self):
        self.assertEqual(slugify("Cre\u0300me"), "creme")

    def test_special_letters_still_work(self):
        self.assertEqual(slugify("Straße in Ærøskøbing"), "strasse-in-aeroskobing")
