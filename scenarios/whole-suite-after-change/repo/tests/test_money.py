import unittest

from shop.money import format_price


class FormatPrice(unittest.TestCase):
    def test_small_amounts(self):
        self.assertEqual(format_price(5), "0.05")
        self.assertEqual(format_price(99), "0.99")

    def test_whole_units(self):
        self.assertEqual(format_price(1000), "10.00")
