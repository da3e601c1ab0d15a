"""A strict reader of Prometheus's text exposition format (version 0.0.4), for the tests of GET /metrics:
what a scraper would refuse or misread fails here, with the line. Checked: every line is a HELP, a TYPE
or a sample (names and label names by the spec's grammar, label values with only the spec's escapes, a
value Go's ParseFloat reads); each sample belongs to a family with HELP and TYPE before it, its samples
together; no series twice; a counter's samples end in _total and are never negative; a histogram's
series have buckets with rising `le` ending at +Inf, cumulative counts, and a _count equal to the +Inf
bucket, and a _sum."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
_SAMPLE = re.compile(rf"^({NAME})(?:\{{(.*)\}})? (\S+)(?: (-?\d+))?$")
_PAIR = re.compile(rf'({LABEL})="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')
_FLOAT = re.compile(r"^[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|Inf|NaN)$")
_TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}

Labels = tuple[tuple[str, str], ...]


@dataclass
class Family:
    name: str
    type: str = ""
    help: str | None = None
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


class FormatError(AssertionError):
    pass


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], value)


def _labels(text: str, line: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        m = _PAIR.match(text, pos)
        if m is None:
            raise FormatError(f"bad labels at {text[pos:]!r}: {line!r}")
        if m.group(1) in labels:
            raise FormatError(f"label {m.group(1)} twice: {line!r}")
        labels[m.group(1)] = _unescape(m.group(2))
        pos = m.end()
    return labels


def _value(text: str, line: str) -> float:
    if not _FLOAT.match(text):
        raise FormatError(f"bad value {text!r}: {line!r}")
    return float(text.replace("Inf", "inf"))


def _family_of(sample: str, families: dict[str, Family]) -> Family | None:
    if sample in families and families[sample].type != "histogram":
        return families[sample]
    for suffix in ("_bucket", "_sum", "_count"):
        base = sample.removesuffix(suffix)
        if base != sample and base in families and families[base].type == "histogram":
            return families[base]
    return None


def parse(text: str) -> dict[str, Family]:
    """The families in `text`, by name; FormatError where it breaks the format."""
    if not text.endswith("\n"):
        raise FormatError("the text must end with a line feed")
    families: dict[str, Family] = {}
    seen: set[tuple[str, Labels]] = set()
    current: Family | None = None
    closed: set[str] = set()  # families whose samples have ended (another family's came)
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            _, keyword, rest = line.split(" ", 2)
            name, _, tail = rest.partition(" ")
            if not re.fullmatch(NAME, name):
                raise FormatError(f"bad metric name: {line!r}")
            family = families.setdefault(name, Family(name))
            if family.samples:
                raise FormatError(f"{keyword} after the samples of {name}: {line!r}")
            if keyword == "HELP":
                if family.help is not None:
                    raise FormatError(f"HELP twice for {name}")
                if re.search(r"\\[^\\n]", tail):
                    raise FormatError(f"HELP with an escape other than \\\\ or \\n: {line!r}")
                family.help = _unescape(tail)
            else:
                if family.type:
                    raise FormatError(f"TYPE twice for {name}")
                if tail not in _TYPES:
                    raise FormatError(f"unknown type: {line!r}")
                family.type = tail
            continue
        if line.startswith("#") or not line.strip():
            raise FormatError(f"a line that is neither HELP, TYPE nor a sample: {line!r}")
        m = _SAMPLE.match(line)
        if m is None:
            raise FormatError(f"bad sample line: {line!r}")
        name, label_text, value_text, _ = m.groups()
        labels = _labels(label_text or "", line)
        value = _value(value_text, line)
        family = _family_of(name, families)
        if family is None or family.help is None or not family.type:
            raise FormatError(f"a sample of {name} without HELP and TYPE before it: {line!r}")
        if family is not current:
            if family.name in closed:
                raise FormatError(f"the samples of {family.name} are not together: {line!r}")
            if current is not None:
                closed.add(current.name)
            current = family
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            raise FormatError(f"a series twice: {line!r}")
        seen.add(key)
        if family.type == "counter" and (not name.endswith("_total") or value < 0 or math.isnan(value)):
            raise FormatError(f"a counter's sample must end in _total and be ≥ 0: {line!r}")
        if "le" in labels and not (family.type == "histogram" and name.endswith("_bucket")):
            raise FormatError(f"le outside a histogram's bucket: {line!r}")
        family.samples.append((name, labels, value))
    for family in families.values():
        if family.help is None or not family.type:
            raise FormatError(f"{family.name} lacks HELP or TYPE")
        if family.type == "histogram":
            _check_histogram(family)
    return families


def _check_histogram(family: Family) -> None:
    series: dict[Labels, dict[str, list[tuple[float, float]]]] = {}
    for name, labels, value in family.samples:
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        parts = series.setdefault(rest, {"_bucket": [], "_sum": [], "_count": []})
        suffix = name.removeprefix(family.name)
        if suffix == "_bucket":
            if "le" not in labels:
                raise FormatError(f"a bucket of {family.name} without le")
            parts["_bucket"].append((_value(labels["le"], name), value))
        else:
            parts[suffix].append((0.0, value))
    for labels, parts in series.items():
        buckets = parts["_bucket"]
        where = f"{family.name}{dict(labels)}"
        if len(parts["_sum"]) != 1 or len(parts["_count"]) != 1 or not buckets:
            raise FormatError(f"{where}: buckets, one _sum and one _count needed")
        bounds = [b for b, _ in buckets]
        if bounds != sorted(bounds) or len(set(bounds)) != len(bounds) or bounds[-1] != math.inf:
            raise FormatError(f"{where}: le must rise and end at +Inf: {bounds}")
        counts = [c for _, c in buckets]
        if counts != sorted(counts):
            raise FormatError(f"{where}: bucket counts are not cumulative: {counts}")
        if counts[-1] != parts["_count"][0][1]:
            raise FormatError(f"{where}: the +Inf bucket {counts[-1]} is not _count {parts['_count'][0][1]}")


def value(families: dict[str, Family], sample: str, **labels: str) -> float:
    """The sum of `sample`'s values over the series whose labels include `labels` (0 when none)."""
    for family in families.values():
        if _family_of(sample, {family.name: family}) is family:
            return sum(
                v for n, ls, v in family.samples if n == sample and all(ls.get(k) == x for k, x in labels.items())
            )
    raise KeyError(sample)
