import unittest

from pyslug import camel_to_snake, snake_to_camel


class AcronymTest(unittest.TestCase):
    def test_leading_acronym(self):
        self.assertEqual(camel_to_snake("HTTPServerError"), "http_server_error")

    def test_inner_acronym(self):
        self.assertEqual(camel_to_snake("parseHTTPResponse"), "parse_http_response")

    def test_two_acronyms_in_a_row_of_words(self):
        self.assertEqual(camel_to_snake("XMLHttpRequest"), "xml_http_request")
        self.assertEqual(camel_to_snake("IOError"), "io_error")

    def test_trailing_acronym(self):
        self.assertEqual(camel_to_snake("getURL"), "get_url")

    def test_acronym_with_underscores(self):
        self.assertEqual(camel_to_snake("_privateHTTPClient"), "_private_http_client")

    def test_simple_names_still_work(self):
        self.assertEqual(camel_to_snake("camelCase"), "camel_case")
        self.assertEqual(camel_to_snake(snake_to_camel("parse_http_response")), "parse_http_response")
