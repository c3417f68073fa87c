"""Per-client request limits for the public API (sliding window)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RateLimiter:
    """Allow at most ``max_requests`` per client in any ``window_s`` seconds."""

    max_requests: int
    window_s: float = 60.0
    _hits: dict[str, list[float]] = field(default_factory=dict, repr=False)

    def _recent(self, client_id: str, now: float) -> list[float]:
        cutoff = now - self.window_s
        return [t for t in self._hits.get(client_id, []) if t > cutoff]

    def allow(self, client_id: str, now: float) -> bool:
        """Record a request made at ``now``; say whether it is within the limit."""
        hits = self._recent(client_id, now)
        if len(hits) > self.max_requests:
            self._hits[client_id] = hits
            return False
        hits.append(now)
        self._hits[client_id] = hits
        return True

    def remaining(self, client_id: str, now: float) -> int:
        """How many more requests ``client_id`` may make right now."""
        return max(0, self.max_requests - len(self._recent(client_id, now)))
