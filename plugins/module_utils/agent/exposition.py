# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus text exposition format 0.0.4, without a client library.

Targets run the system Python with stdlib and pyroute2 only; the format is
a few lines of text, so writing it here beats a dependency.
"""

from __future__ import annotations

import math

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Family:
    """One metric family: name, type, help and its samples."""

    def __init__(self, name: str, kind: str, help_text: str):
        self.name = name
        self.kind = kind
        self.help = help_text
        self.samples = []

    def add(self, value, **labels) -> "Family":
        self.samples.append((labels, value))
        return self


def _escape(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value) -> str:
    if value is None:
        return "NaN"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return repr(value)
    return str(int(value))


def render(families) -> str:
    lines = []
    for fam in families:
        lines.append("# HELP %s %s" % (fam.name, fam.help.replace("\\", "\\\\").replace("\n", "\\n")))
        lines.append("# TYPE %s %s" % (fam.name, fam.kind))
        for labels, value in fam.samples:
            if labels:
                text = ",".join('%s="%s"' % (k, _escape(v)) for k, v in sorted(labels.items()))
                lines.append("%s{%s} %s" % (fam.name, text, _number(value)))
            else:
                lines.append("%s %s" % (fam.name, _number(value)))
    return "\n".join(lines) + "\n"


def parse(text: str) -> dict:
    """{(name, frozenset(labels.items())): value}: the inverse of render, for tests and status."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _sep, value = line.rpartition(" ")
        labels = {}
        if "{" in head:
            name, rest = head.split("{", 1)
            for part in _split_labels(rest.rstrip("}")):
                k, v = part.split("=", 1)
                labels[k] = v[1:-1].replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        else:
            name = head
        out[(name, frozenset(labels.items()))] = float(value)
    return out


def _split_labels(text: str):
    part, quoted, escaped = "", False, False
    for ch in text:
        if escaped:
            part += ch
            escaped = False
        elif ch == "\\":
            part += ch
            escaped = True
        elif ch == '"':
            part += ch
            quoted = not quoted
        elif ch == "," and not quoted:
            yield part
            part = ""
        else:
            part += ch
    if part:
        yield part
