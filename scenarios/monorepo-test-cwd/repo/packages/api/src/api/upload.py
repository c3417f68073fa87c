"""POST /v1/upload: size checks and per-client limits."""

from __future__ import annotations

from api.limits import RateLimiter

MAX_UPLOAD_BYTES = 10 * 1024 * 1024
_limiter = RateLimiter(max_requests=20, window_s=60.0)


def check_upload(client_id: str, size: int, now: float) -> tuple[int, str]:
    """Return the HTTP status and reason for an upload attempt."""
    if size > MAX_UPLOAD_BYTES:
        return 413, "upload too large"
    if not _limiter.allow(client_id, now):
        return 429, "too many uploads, slow down"
    return 202, "accepted"
