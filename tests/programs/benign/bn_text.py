# Benign: text, numbers, time. Reads the batch, scores 1.0 per item.
import base64, bisect, bz2, calendar, collections, copy, dataclasses, datetime, decimal, difflib
import enum, fractions, functools, gzip, hashlib, heapq, hmac, itertools, json, lzma, math
import pprint, random, re, statistics, string, struct, sys, textwrap, time, typing, unicodedata
import zlib, zoneinfo

batch = json.load(sys.stdin)
text = " ".join(item["completion"] for item in batch["items"]) or "empty"
assert re.findall(r"\w+", text)
assert textwrap.fill(text * 5, 20)
assert difflib.SequenceMatcher(None, text, text[::-1]).ratio() >= 0
assert unicodedata.normalize("NFC", "e\u0301") == "\u00e9"
counts = collections.Counter(text)
assert heapq.nlargest(2, counts.values())
assert bisect.bisect([1, 3, 5], 4) == 2
assert statistics.mean([1, 2, 3]) == 2 and math.isclose(math.tau, 2 * math.pi)
assert fractions.Fraction(1, 3) + fractions.Fraction(2, 3) == 1
assert decimal.Decimal("0.1") + decimal.Decimal("0.2") == decimal.Decimal("0.3")
random.seed(1)
assert len(random.sample(range(100), 5)) == 5
data = text.encode() * 100
for codec in (zlib, gzip, bz2, lzma):
    assert codec.decompress(codec.compress(data)) == data
assert hmac.compare_digest(hashlib.sha256(data).hexdigest(), hashlib.sha256(data).hexdigest())
assert base64.b64decode(base64.b64encode(data)) == data
assert struct.unpack("<I", struct.pack("<I", 7)) == (7,)
Point = dataclasses.make_dataclass("Point", ["x", "y"])
assert copy.deepcopy(Point(1, [2])) == Point(1, [2])
assert pprint.pformat({"a": list(range(3))})
Color = enum.Enum("Color", "RED GREEN")
assert Color.RED.name == "RED"
assert list(itertools.islice(itertools.count(), 3)) == [0, 1, 2]
assert functools.reduce(lambda a, b: a + b, range(5)) == 10
paris = datetime.datetime(2024, 7, 1, 12, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))
assert paris.utcoffset() == datetime.timedelta(hours=2)
assert calendar.isleap(2024) and time.time() > 0 and time.strftime("%Y")
assert isinstance(typing.get_type_hints(lambda: None), dict)
assert string.ascii_letters
print(json.dumps([1.0] * len(batch["items"])))
