import unittest

from pyslug import camel_to_snake, snake_to_camel


class CamelToSnakeTest(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(camel_to_snake("camelCase"), "camel_case")
        self.assertEqual(camel_to_snake("PascalCase"), "pascal_case")

    def test_already_snake(self):
        self.assertEqual(camel_to_snake("already_snake"), "already_snake")

    def test_digits(self):
        self.assertEqual(camel_to_snake("version2Name"), "version2_name")

    def test_underscores_are_preserved(self):
        self.assertEqual(camel_to_snake("_privateName"), "_private_name")
        self.assertEqual(camel_to_snake("__dunderName__"), "__dunder_name__")

    def test_dashes(self):
        self.assertEqual(camel_to_snake("kebab-caseName"), "kebab_case_name")

    def test_empty(self):
        self.assertEqual(camel_to_snake(""), "")


class SnakeToCamelTest(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(snake_to_camel("snake_case_name"), "snakeCaseName")

    def test_upper_first(self):
        self.assertEqual(snake_to_camel("snake_case", upper_first=True), "SnakeCase")

    def test_leading_underscore(self):
        self.assertEqual(snake_to_camel("_private_name"), "_privateName")

    def test_round_trip(self):
        for name in ["parse_response", "x", "one_two_three"]:
            self.assertEqual(camel_to_snake(snake_to_camel(name)), name)


if __name__ == "__main__":
    unittest.main()
