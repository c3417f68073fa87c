from api.limits import RateLimiter


def test_allows_up_to_the_limit():
    limiter = RateLimiter(max_requests=3, window_s=60)
    assert [limiter.allow("c1", t) for t in (0, 1, 2)] == [True, True, True]


def test_refuses_the_first_request_over_the_limit():
    limiter = RateLimiter(max_requests=3, window_s=60)
    for t in (0, 1, 2):
        limiter.allow("c1", t)
    assert limiter.allow("c1", 3) is False


def test_window_slides():
    limiter = RateLimiter(max_requests=2, window_s=10)
    assert limiter.allow("c1", 0)
    assert limiter.allow("c1", 1)
    assert not limiter.allow("c1", 2)
    assert limiter.allow("c1", 11)


def test_clients_are_counted_separately():
    limiter = RateLimiter(max_requests=1, window_s=60)
    assert limiter.allow("a", 0)
    assert limiter.allow("b", 0)
    assert not limiter.allow("a", 1)


def test_remaining():
    limiter = RateLimiter(max_requests=3, window_s=60)
    limiter.allow("c1", 0)
    assert limiter.remaining("c1", 1) == 2
