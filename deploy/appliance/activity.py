"""A realistic activity stream for the demo: page views, searches and clicks as JSON.

Like real web logs, the events repeat a lot (a handful of user agents, a catalogue of
URLs, the same field names on every line), which is what makes zstd batch compression
pay: the stream is generated deterministically from a seed, so runs are comparable.
Each event is keyed by its user id, so one user's events stay in order in one partition.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass

TOPICS = ("pageviews", "searches", "clicks")
# Roughly how a shop's traffic splits.
_WEIGHTS = (0.6, 0.25, 0.15)

USER_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 "
    "Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 "
    "Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.43 "
    "Mobile Safari/537.36",
    "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 "
    "Edg/120.0.2210.61",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
)
SITE = "https://shop.example.com"
SECTIONS = ("products", "categories", "deals", "brands", "help")
REFERRERS = (
    "https://www.google.com/",
    "https://www.bing.com/",
    "https://duckduckgo.com/",
    "https://news.ycombinator.com/",
    "",
    "",
    "",
)
QUERY_WORDS = (
    "red", "blue", "black", "running", "trail", "shoes", "jacket", "waterproof", "kids", "women", "men",
    "wool", "socks", "backpack", "tent", "lamp", "sale", "gift", "leather", "boots",
)  # fmt: skip
COUNTRIES = {
    "east": ("US", "US", "US", "CA", "BR", "MX"),
    "west": ("DE", "FR", "GB", "NL", "ES", "IT", "PL"),
}


@dataclass(frozen=True)
class Event:
    topic: str
    key: bytes
    value: bytes


class ActivityStream:
    """Endless events of one datacenter; ``events(n)`` yields the next n."""

    def __init__(self, datacenter: str, seed: int = 7, users: int = 50_000) -> None:
        self.datacenter = datacenter
        self._rng = random.Random(f"{seed}-{datacenter}")
        self._users = users
        self._countries = COUNTRIES.get(datacenter, ("US", "DE", "JP", "IN"))
        self._clock_ms = 1_764_000_000_000  # a fixed start: the same seed gives the same bytes
        self._sequence = 0

    def _url(self) -> str:
        section = self._rng.choice(SECTIONS)
        return f"{SITE}/{section}/{self._rng.randrange(2000)}"

    def _common(self, kind: str) -> dict[str, object]:
        self._clock_ms += self._rng.randrange(0, 40)
        self._sequence += 1
        user = self._rng.randrange(self._users)
        return {
            "type": kind,
            "event_id": f"{self.datacenter}-{self._sequence:010d}",
            "ts": self._clock_ms,
            "user_id": f"u{user:07d}",
            "session_id": f"s{user:07d}-{self._clock_ms // 1_800_000}",
            "country": self._rng.choice(self._countries),
            "user_agent": self._rng.choice(USER_AGENTS),
            "datacenter": self.datacenter,
        }

    def next_event(self) -> Event:
        topic = self._rng.choices(TOPICS, _WEIGHTS)[0]
        if topic == "pageviews":
            event = self._common("pageview")
            event.update(url=self._url(), referrer=self._rng.choice(REFERRERS), load_ms=self._rng.randrange(80, 2500))
        elif topic == "searches":
            event = self._common("search")
            words = self._rng.sample(QUERY_WORDS, self._rng.randrange(1, 4))
            event.update(
                url=f"{SITE}/search?q={'+'.join(words)}",
                query=" ".join(words),
                results=self._rng.randrange(0, 500),
                page=self._rng.choice((1, 1, 1, 2, 3)),
            )
        else:
            event = self._common("click")
            event.update(url=self._url(), target=self._url(), position=self._rng.randrange(1, 25))
        return Event(topic, str(event["user_id"]).encode(), json.dumps(event, separators=(",", ":")).encode())

    def events(self, count: int) -> Iterator[Event]:
        for _ in range(count):
            yield self.next_event()
