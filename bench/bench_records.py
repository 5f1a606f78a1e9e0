"""Record batch v2 throughput: build, parse and validate, against kafka-python.

Records are JSON activity events (page views, searches, clicks) from a seeded
generator: a few thousand users with fixed user agents, IPs and locales, a
catalogue of URLs, repeated field names; so zstd finds what it finds in real
topics. Every value is exactly 200 or 1024 bytes, keyed by an 8-byte user id.
A batch holds a fixed number of records (320 x 200 B or 64 x 1 KiB: about
64 KiB of values), without headers.

Operations, each over the same corpus of batches for both libraries:

* build: append every record to a fresh builder, then build (compress + CRC).
  Tributary: ``BatchBuilder``; kafka-python: ``DefaultRecordBatchBuilder``.
* parse: check the CRC, decompress and decode every record, as a consumer.
  Tributary: ``iter_records`` (CRC on by default); kafka-python:
  ``DefaultRecordBatch`` + ``validate_crc()`` + iteration.
* validate: header and CRC only, the broker's path; nothing decompressed.
  Tributary: ``validate_batch``; kafka-python: ``DefaultRecordBatch(...).validate_crc()``.

MB/s counts uncompressed key + value bytes (10^6 bytes), whatever the codec.
Both libraries use the same CRC-32C (the ``crc32c`` package) and zstd
(``zstandard``, level 3) underneath. Run from the repository root::

    .venv/bin/python -m bench.bench_records [--quick] [--seconds S] [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import collections
import importlib.metadata
import itertools
import json
import random
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tributary.protocol.compression import Compression
from tributary.protocol.crc32c import IMPLEMENTATION
from tributary.protocol.records import BatchBuilder, iter_records, validate_batch

from . import common

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # raised by kafka-python's package import
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

DEFAULT_SECONDS = 2.5
QUICK_SECONDS = 0.1
SEED = 20240601
T0 = 1_717_200_000_000  # 2024-06-01, ms

#: (value size in bytes, records per batch)
SHAPES = ((200, 320), (1024, 64))
CODECS = (Compression.NONE, Compression.ZSTD)
OPERATIONS = ("build", "parse", "validate")

RecordTuple = tuple[bytes, bytes, int]  # key, value, timestamp

# --- the events ----------------------------------------------------------------------

#: (User-Agent header, the short form a compact event carries)
USER_AGENTS = (
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36"
        " (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
        "Chrome 124 Windows",
    ),
    (
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15"
        " (KHTML, like Gecko) Version/17.4.1 Safari/605.1.15",
        "Safari 17 macOS",
    ),
    (
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15"
        " (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1",
        "Safari 17 iOS",
    ),
    (
        "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36"
        " (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36",
        "Chrome 124 Android",
    ),
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0",
        "Firefox 125 Windows",
    ),
    (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/123.0.0.0 Safari/537.36",
        "Chrome 123 Linux",
    ),
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36"
        " (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.80",
        "Edge 124 Windows",
    ),
    (
        "Mozilla/5.0 (Linux; Android 13; SM-S911B) AppleWebKit/537.36"
        " (KHTML, like Gecko) Chrome/123.0.6312.118 Mobile Safari/537.36",
        "Chrome 123 Android",
    ),
    (
        "Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15"
        " (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
        "Safari 17 iPadOS",
    ),
    (
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36"
        " (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
        "Chrome 124 macOS",
    ),
)
CATEGORIES = ("shoes", "jackets", "backpacks", "tents", "sleeping-bags", "socks", "hats", "gloves", "climbing", "bikes")
WORDS = (
    "trail",
    "running",
    "waterproof",
    "lightweight",
    "insulated",
    "merino",
    "wool",
    "down",
    "hooded",
    "zip",
    "pocket",
    "women",
    "men",
    "kids",
    "size",
    "color",
    "black",
    "blue",
    "green",
    "red",
    "grey",
    "ultralight",
    "breathable",
    "reflective",
    "recycled",
    "winter",
    "summer",
    "hiking",
    "camping",
    "alpine",
    "road",
    "gravel",
    "mountain",
    "cushioned",
    "grip",
    "vibram",
    "gore-tex",
    "packable",
)
PAGES = ("/", "/cart", "/checkout", "/account/orders", "/account/settings", "/stores", "/help/returns", "/sale")
REFERRERS = ("https://www.google.com/", "https://duckduckgo.com/", "https://www.bing.com/", "", "https://t.co/")
COUNTRIES = (
    ("US", "en-US", "America/New_York"),
    ("DE", "de-DE", "Europe/Berlin"),
    ("GB", "en-GB", "Europe/London"),
    ("FR", "fr-FR", "Europe/Paris"),
    ("JP", "ja-JP", "Asia/Tokyo"),
    ("BR", "pt-BR", "America/Sao_Paulo"),
)
DEVICES = (
    ("desktop", "1920x1080"),
    ("desktop", "2560x1440"),
    ("mobile", "390x844"),
    ("mobile", "412x915"),
    ("tablet", "820x1180"),
)
EXPERIMENTS = ("checkout-v2", "reco-carousel", "free-shipping-banner", "search-rerank", "dark-mode", "one-click-buy")
UTM_SOURCES = ("google", "newsletter", "instagram", "bing", "partner-blog")
ELEMENTS = ("add-to-cart", "buy-now", "product-card", "nav-menu", "search-result", "banner", "filter-size", "wishlist")


@dataclass(frozen=True)
class User:
    key: bytes
    ua: str
    browser: str
    cookie: str
    first_seen: int
    logged_in: bool
    ip: str
    country: tuple[str, str, str]
    device: tuple[str, str]
    experiments: tuple[str, ...]


def make_users(rng: random.Random, count: int) -> list[User]:
    users = []
    for i in range(count):
        ua, browser = rng.choice(USER_AGENTS)
        users.append(
            User(
                key=b"u%07d" % i,
                ua=ua,
                browser=browser,
                cookie=f"{rng.getrandbits(64):016x}",
                first_seen=T0 - rng.randint(0, 400) * 86_400_000,
                logged_in=rng.random() < 0.4,
                ip=f"{rng.randint(1, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
                country=rng.choice(COUNTRIES),
                device=rng.choice(DEVICES),
                experiments=tuple(sorted(rng.sample(EXPERIMENTS, rng.randint(0, 3)))),
            )
        )
    return users


def sku(rng: random.Random, category: str | None = None) -> str:
    return f"{(category or rng.choice(CATEGORIES))[:3].upper()}-{rng.randint(1000, 1400)}"


def url(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.45:
        category = rng.choice(CATEGORIES)
        return f"https://shop.example.com/p/{category}/{sku(rng, category).lower()}?ref=listing"
    if roll < 0.75:
        return f"https://shop.example.com/c/{rng.choice(CATEGORIES)}?page={rng.randint(1, 5)}&sort=popular"
    return "https://shop.example.com" + rng.choice(PAGES)


def event_fields(rng: random.Random, user: User, ts: int) -> list[tuple[str, Any]]:
    """An event's fields, most important first; the tail is dropped to fit."""
    kind = rng.choices(("page_view", "search", "click"), weights=(6, 2, 2))[0]
    fields: list[tuple[str, Any]] = [
        ("type", kind),
        ("ts", ts),
        ("user", user.key.decode()),
        ("session", f"{int.from_bytes(user.key[1:], 'big') * 2654435761 % 2**48:012x}"),
        ("url", url(rng)),
    ]
    if kind == "search":
        fields += [("query", " ".join(rng.sample(WORDS, rng.randint(1, 4)))), ("results", rng.randint(0, 480))]
    elif kind == "click":
        fields += [("target", rng.choice(ELEMENTS)), ("position", rng.randint(1, 24))]
    fields += [
        ("browser", user.browser),
        ("country", user.country[0]),
        ("device", user.device[0]),
        ("referrer", rng.choice(REFERRERS)),
        ("ua", user.ua),
        ("ip", user.ip),
        ("locale", user.country[1]),
        ("tz", user.country[2]),
        ("screen", user.device[1]),
        ("experiments", list(user.experiments)),
        ("perf", {"ttfb": rng.randint(20, 400), "dom": rng.randint(200, 2500), "load": rng.randint(400, 6000)}),
        ("cart", {"items": rng.randint(0, 6), "value_cents": rng.randint(0, 60000), "currency": "EUR"}),
        ("viewed", [sku(rng) for _ in range(rng.randint(2, 12))]),
        ("breadcrumbs", ["home", rng.choice(CATEGORIES), " ".join(rng.sample(WORDS, 2))]),
        ("app", {"name": "web-storefront", "version": f"5.{rng.randint(10, 14)}.{rng.randint(0, 9)}", "env": "prod"}),
        ("consent", {"analytics": True, "ads": rng.random() < 0.6, "version": 3}),
        ("utm", {"source": rng.choice(UTM_SOURCES), "medium": "cpc", "campaign": f"spring-{rng.choice(CATEGORIES)}"}),
        ("previous_url", url(rng)),
        ("client", {"cookie": user.cookie, "first_seen": user.first_seen, "logged_in": user.logged_in}),
    ]
    return fields


def encode_event(fields: Sequence[tuple[str, Any]], size: int, rng: random.Random) -> bytes:
    """The fields as a JSON object of exactly ``size`` bytes: fields that do
    not fit are skipped, then a ``note`` of words (or spaces) fills the rest."""
    parts: list[str] = []
    used = 2  # the braces
    reserve = len(',"note":""')
    for name, value in fields:
        part = json.dumps(name) + ":" + json.dumps(value, separators=(",", ":"))
        extra = len(part) + (1 if parts else 0)
        if used + extra + reserve <= size:
            parts.append(part)
            used += extra
    room = size - used - reserve
    note = ""
    while len(note) < room:
        note += (" " if note else "") + rng.choice(WORDS)
    parts.append('"note":' + json.dumps(note[:room]))
    text = "{" + ",".join(parts) + "}"
    text = text[:-1] + " " * (size - len(text)) + "}"
    data = text.encode()
    assert len(data) == size, (len(data), size)
    return data


def make_corpus(value_size: int, per_batch: int, batches: int) -> list[list[RecordTuple]]:
    rng = random.Random(SEED + value_size)
    users = make_users(rng, 5000)
    weights = [1 / (i + 1) ** 0.8 for i in range(len(users))]  # a few users are busy, most are not
    # Accumulated once: choices() would add up the 5,000 weights again on every call (the same draws).
    cum_weights = list(itertools.accumulate(weights))
    ts = T0
    corpus = []
    for _ in range(batches):
        batch = []
        for _ in range(per_batch):
            ts += rng.randint(0, 25)
            user = rng.choices(users, cum_weights=cum_weights)[0]
            batch.append((user.key, encode_event(event_fields(rng, user, ts), value_size, rng), ts))
        corpus.append(batch)
    return corpus


# --- the operations ------------------------------------------------------------------


def ours_build(corpus: Sequence[Sequence[RecordTuple]], codec: Compression) -> list[bytes]:
    built = []
    for records in corpus:
        builder = BatchBuilder(codec)
        append = builder.append
        for key, value, ts in records:
            append(key, value, (), ts)
        built.append(builder.build())
    return built


def theirs_build(corpus: Sequence[Sequence[RecordTuple]], codec: Compression) -> list[bytearray]:
    built = []
    for records in corpus:
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=int(codec),
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 30,
        )
        append = builder.append
        for offset, (key, value, ts) in enumerate(records):
            append(offset, ts, key, value, [])
        built.append(builder.build())
    return built


def ours_parse(batches: Sequence[bytes]) -> None:
    drain = collections.deque[object](maxlen=0).extend
    for data in batches:
        drain(iter_records(data))


def theirs_parse(batches: Sequence[bytes]) -> None:
    drain = collections.deque[object](maxlen=0).extend
    for data in batches:
        batch = DefaultRecordBatch(data)
        if not batch.validate_crc():
            raise AssertionError("kafka-python rejected a CRC")
        drain(batch)


def ours_validate(batches: Sequence[bytes]) -> None:
    for data in batches:
        validate_batch(data)


def theirs_validate(batches: Sequence[bytes]) -> None:
    for data in batches:
        if not DefaultRecordBatch(data).validate_crc():
            raise AssertionError("kafka-python rejected a CRC")


def cross_check(corpus: Sequence[Sequence[RecordTuple]], ours: Sequence[bytes], theirs: Sequence[bytes]) -> None:
    """Each library reads the other's batches back to the records put in."""
    for records, our_data, their_data in zip(corpus, ours, theirs, strict=True):
        expected = [(key, value, ts) for key, value, ts in records]
        assert [(r.key, r.value, r.timestamp) for r in iter_records(bytes(their_data))] == expected
        batch = DefaultRecordBatch(our_data)
        assert batch.validate_crc()
        assert [(r.key, r.value, r.timestamp) for r in batch] == expected


def same_bytes(ours: Sequence[bytes], theirs: Sequence[bytes]) -> bool:
    """Whether the two libraries built the same batches, but for partitionLeaderEpoch
    (bytes 12-15, outside the CRC), which Tributary's producer sets to -1 as
    Kafka's Java client does and kafka-python to 0."""
    return all(o[:12] + o[16:] == t[:12] + t[16:] for o, t in zip(ours, theirs, strict=True))


# --- running -----------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    value_size: int
    per_batch: int
    #: Uncompressed key + value bytes per record.
    record_bytes: float
    codec: str
    operation: str
    ours: common.Rate
    theirs: common.Rate
    ratio: float


def measure(
    ours: Callable[[], object], theirs: Callable[[], object], settings: common.Settings
) -> tuple[int, list[list[float]]]:
    """Rounds of ``inner`` passes over the corpus, the same for both sides,
    set so that each side's round takes at least the minimum."""
    inner = max(
        common.calibrate(lambda n: loop(ours, n), settings.min_round_seconds),
        common.calibrate(lambda n: loop(theirs, n), settings.min_round_seconds),
    )
    times = common.paired_rounds(
        [lambda: loop(ours, inner), lambda: loop(theirs, inner)],
        seconds=settings.seconds,
        repeat=settings.repeat,
        min_rounds=2 if settings.quick else 5,  # a smoke run only needs the code to run
    )
    return inner, times


def loop(fn: Callable[[], object], n: int) -> None:
    for _ in range(n):
        fn()


def operations(
    corpus: Sequence[Sequence[RecordTuple]], codec: Compression, batches: Sequence[bytes]
) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    """(ours, theirs) per operation. Parse and validate both read the same
    bytes: Tributary's batches (see :func:`same_bytes`)."""
    return {
        "build": (lambda: ours_build(corpus, codec), lambda: theirs_build(corpus, codec)),
        "parse": (lambda: ours_parse(batches), lambda: theirs_parse(batches)),
        "validate": (lambda: ours_validate(batches), lambda: theirs_validate(batches)),
    }


def run(settings: common.Settings, batches: int) -> tuple[list[Row], list[dict[str, Any]]]:
    rows: list[Row] = []
    notes: list[dict[str, Any]] = []
    for value_size, per_batch in SHAPES:
        corpus = make_corpus(value_size, per_batch, batches)
        records = batches * per_batch
        payload = sum(len(key) + len(value) for batch in corpus for key, value, _ in batch)
        for codec in CODECS:
            ours_batches = ours_build(corpus, codec)
            their_batches = [bytes(data) for data in theirs_build(corpus, codec)]
            cross_check(corpus, ours_batches, their_batches)
            notes.append(
                {
                    "value_size": value_size,
                    "records_per_batch": per_batch,
                    "batches": batches,
                    "codec": codec.name.lower(),
                    "payload_bytes_per_batch": payload // batches,
                    "batch_bytes_ours": sum(map(len, ours_batches)) // batches,
                    "batch_bytes_theirs": sum(map(len, their_batches)) // batches,
                    "identical_bytes": same_bytes(ours_batches, their_batches),
                }
            )
            pairs = operations(corpus, codec, ours_batches)
            for operation in OPERATIONS:
                inner, times = measure(*pairs[operation], settings)
                rows.append(
                    Row(
                        value_size=value_size,
                        per_batch=per_batch,
                        record_bytes=payload / records,
                        codec=codec.name.lower(),
                        operation=operation,
                        ours=common.rate(inner * records, times[0]),
                        theirs=common.rate(inner * records, times[1]),
                        ratio=common.paired_ratio(times[0], times[1]),
                    )
                )
                if not settings.json:
                    print(f"  measured {value_size} B {codec.name.lower()} {operation}", file=sys.stderr)
    return rows, notes


def mb_per_s(row: Row, rate: common.Rate) -> float:
    return rate.median * row.record_bytes / 1e6


def report(rows: Sequence[Row], notes: Sequence[dict[str, Any]], batches: int) -> str:
    versions = (
        f"kafka-python {importlib.metadata.version('kafka-python')}, "
        f"zstandard {importlib.metadata.version('zstandard')}, CRC-32C: {IMPLEMENTATION}"
    )
    lines = [
        "Record batch v2: Tributary (ours) vs kafka-python (theirs)",
        common.machine_line(),
        versions,
        f"corpus: {batches} batches per shape, 8-byte keys, no headers; parse and validate read Tributary's batches",
        "MB/s = 10^6 bytes of uncompressed key+value per second, median over rounds; "
        "ours/theirs = median of per-round ratios",
        "",
        common.table(
            [
                "value",
                "records/batch",
                "codec",
                "payload/batch",
                "batch (ours)",
                "batch (theirs)",
                "compression",
                "same bytes*",
            ],
            [
                [
                    f"{n['value_size']} B",
                    str(n["records_per_batch"]),
                    n["codec"],
                    f"{n['payload_bytes_per_batch']:,}",
                    f"{n['batch_bytes_ours']:,}",
                    f"{n['batch_bytes_theirs']:,}",
                    f"{n['payload_bytes_per_batch'] / n['batch_bytes_ours']:.2f}x" if n["codec"] != "none" else "-",
                    "yes" if n["identical_bytes"] else "no",
                ]
                for n in notes
            ],
            left=1,
        ),
        "* the same bytes but for partitionLeaderEpoch (outside the CRC): -1 from Tributary, 0 from kafka-python",
        "",
        common.table(
            ["value", "codec", "op", "ours MB/s", "ours rec/s", "theirs MB/s", "theirs rec/s", "ours/theirs", "rounds"],
            [
                [
                    f"{r.value_size} B",
                    r.codec,
                    r.operation,
                    f"{mb_per_s(r, r.ours):,.1f}",
                    f"{r.ours.median:,.0f}",
                    f"{mb_per_s(r, r.theirs):,.1f}",
                    f"{r.theirs.median:,.0f}",
                    f"{r.ratio:.2f}x",
                    str(r.ours.rounds),
                ]
                for r in rows
            ],
            left=3,
        ),
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    common.add_arguments(parser, default_seconds=DEFAULT_SECONDS, quick_seconds=QUICK_SECONDS)
    parser.add_argument("--batches", type=int, default=None, help="batches per corpus (default 16, 4 with --quick)")
    args = parser.parse_args(argv)
    settings = common.settings(args, default_seconds=DEFAULT_SECONDS, quick_seconds=QUICK_SECONDS)
    batches = args.batches or (4 if settings.quick else 16)
    rows, notes = run(settings, batches)
    if settings.json:
        print(
            json.dumps(
                {
                    "benchmark": "records",
                    "machine": common.machine(),
                    "settings": {"seconds": settings.seconds, "repeat": settings.repeat, "batches": batches},
                    "implementation": {
                        "crc32c": IMPLEMENTATION,
                        "kafka-python": importlib.metadata.version("kafka-python"),
                    },
                    "corpus": notes,
                    "results": [
                        {
                            "value_size": r.value_size,
                            "records_per_batch": r.per_batch,
                            "codec": r.codec,
                            "operation": r.operation,
                            "ours": {
                                "mb_per_s": mb_per_s(r, r.ours),
                                "records_per_s": r.ours.median,
                                "best_records_per_s": r.ours.best,
                                "rounds": r.ours.rounds,
                            },
                            "theirs": {
                                "mb_per_s": mb_per_s(r, r.theirs),
                                "records_per_s": r.theirs.median,
                                "best_records_per_s": r.theirs.best,
                                "rounds": r.theirs.rounds,
                            },
                            "ratio": r.ratio,
                        }
                        for r in rows
                    ],
                },
                indent=2,
            )
        )
    else:
        print(report(rows, notes, batches))


if __name__ == "__main__":
    main()
