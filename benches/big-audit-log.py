#!/usr/bin/env python3
"""Writes an audit log of at least SIZE bytes made of a real one, for ingest figures.

usage: big-audit-log.py AUDIT_LOG OUT [SIZE_MB]   (default 1024)

Each copy of the log gets its own auditIDs and resourceVersions shifted past the previous copy's,
so that every copy replays like the first: the objects a copy creates again are newer states of
the same objects, and its updates are based on the states its own events left.
"""
import re
import sys

src, out = sys.argv[1], sys.argv[2]
size = int(sys.argv[3]) * 1024 * 1024 if len(sys.argv) > 3 else 1024 * 1024 * 1024

lines = open(src, encoding="utf-8").read().splitlines()
rvs = [int(m) for l in lines for m in re.findall(r'"resourceVersion":"(\d+)"', l)]
step = (max(rvs) if rvs else 0) + 1
rv = re.compile(r'"resourceVersion":"(\d+)"')
audit = re.compile(r'"auditID":"([^"]+)"')

written = 0
copy = 0
with open(out, "w", encoding="utf-8") as f:
    while written < size:
        shift = copy * step
        for line in lines:
            line = rv.sub(lambda m: '"resourceVersion":"%d"' % (int(m.group(1)) + shift), line)
            line = audit.sub(lambda m: '"auditID":"%s-%d"' % (m.group(1), copy), line)
            f.write(line)
            f.write("\n")
            written += len(line) + 1
        copy += 1
print(f"{out}: {copy} copies, {written} bytes")
