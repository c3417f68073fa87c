import unittest

from shop.export import export_line


class ExportLine(unittest.TestCase):
    def test_one_line_has_two_fields(self):
        self.assertEqual(export_line("A-1", 123456).split(","), ["A-1", "1234.56"])
