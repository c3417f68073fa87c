from worker.digest import digest_subject


def test_singular():
    assert digest_subject("acme", 1) == "[acme] 1 new order today"


def test_plural():
    assert digest_subject("acme", 3) == "[acme] 3 new orders today"
