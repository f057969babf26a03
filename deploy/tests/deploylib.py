"""Shared helpers of the deploy/ checks (Debian's /usr/bin/python3 + python3-yaml).

Errors are collected, not raised: a check reports every problem it finds in one
run. `Report.fail(...)` records one; `Report.finish()` prints them and exits 1
when there are any.
"""

import re
import sys

import yaml


class Report:
    def __init__(self, name):
        self.name = name
        self.errors = []
        self.checked = 0

    def fail(self, message):
        self.errors.append(message)

    def check(self, condition, message):
        """Records MESSAGE unless CONDITION holds; returns CONDITION."""
        self.checked += 1
        if not condition:
            self.fail(message)
        return bool(condition)

    def finish(self):
        for e in self.errors:
            print(f"FAIL [{self.name}]: {e}", file=sys.stderr)
        if self.errors:
            print(f"{self.name}: {len(self.errors)} problem(s) in {self.checked} checks", file=sys.stderr)
            sys.exit(1)
        print(f"{self.name}: {self.checked} checks passed")


def load_yaml(path):
    with open(path) as f:
        return yaml.safe_load(f)


def load_yaml_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


_FLAG_LINE = re.compile(r"^\s+--([a-z0-9_]+) \(")
_DEFAULT = re.compile(r"default: (.*);\s*$")


def parse_help_flags(help_text):
    """{flag: default string} from an abseil --help listing (rankd, rankctl).

    A flag's entry starts with "    --name (description...)" and its last line
    ends in "default: VALUE;".
    """
    flags = {}
    current = None
    for line in help_text.splitlines():
        m = _FLAG_LINE.match(line)
        if m:
            current = m.group(1)
            flags[current] = None
        if current is not None:
            d = _DEFAULT.search(line)
            if d:
                flags[current] = d.group(1).strip('"')
                current = None
    return flags


def split_flag(arg):
    """('name', 'value' or None) for '--name=value' / '--name'; None otherwise."""
    if not arg.startswith("-"):
        return None
    body = arg.lstrip("-")
    name, sep, value = body.partition("=")
    return name, (value if sep else None)


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text):
    """Seconds of an abseil / Go duration ("30s", "1m30s", "500ms"); None if malformed."""
    text = text.strip()
    if text in ("0", "0s"):
        return 0.0
    pos = 0
    total = 0.0
    for m in _DURATION_PART.finditer(text):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(text) or pos == 0:
        return None
    return total


def labels_match(selector, labels):
    """True if matchLabels SELECTOR (a dict) is a subset of LABELS."""
    if not selector:
        return False
    return all(labels.get(k) == v for k, v in selector.items())
