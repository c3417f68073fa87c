import unittest

from shop.money import format_price


class FormatPrice(unittest.TestCase):
    def test_small_amounts(self):
        self.assertEqual(format_price(5), "0.05")

    def test_large_amounts(self):
        self.assertEqual(format_price(123456), "1234.56")
