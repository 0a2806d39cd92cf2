#!/usr/bin/env python3
"""Extract and clean the King James Bible (public domain) from Debian's
`bible-kjv-text` package into train/test text files for the tiny model.

    apt-get install -y bible-kjv-text        # brings /usr/bin/bible (bible-kjv)
    python3 tools/corpus.py [--out tools/data]

Writes OUT/kjv-train.txt, OUT/kjv-test.txt and OUT/corpus.json (sizes, sha256).

Format: one chapter per paragraph: a heading line "Genesis 1", then one verse
per line with the verse number dropped; chapters are separated by one empty
line. The text is plain ASCII (the package's text has no other characters).

Split: chapters are numbered 0..1188 in canonical order; chapter i is held
out when i % TEST_EVERY == TEST_OFFSET (19 chapters, about 53 KB, spread over
the whole book). Deterministic; no randomness involved.

The `fortunes` package is not used: its quotations are not public domain.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

TEST_EVERY = 64
TEST_OFFSET = 32
# The whole Bible, Genesis 1:1 to Revelation 22:21, one verse per line.
SPEC = "gen1:1-rev22:21"


def read_bible():
    exe = shutil.which("bible")
    if exe is None:
        sys.exit("corpus.py: no `bible` program; run: apt-get install -y bible-kjv-text")
    # -l: line width; large so no verse is wrapped.
    out = subprocess.run([exe, "-l100000", SPEC], check=True, capture_output=True).stdout
    return out.decode("ascii")


def chapters(raw):
    """[(heading, [verse, ...])] in canonical order."""
    result = []
    for line in raw.split("\n"):
        if not line.strip():
            continue
        if not line.startswith(" "):
            # "Genesis 1", "1 Samuel 3", "Song of Solomon 2"
            if not re.fullmatch(r"[1-3]? ?[A-Z][A-Za-z ]+ \d+", line.strip()):
                sys.exit(f"corpus.py: unexpected heading {line!r}")
            result.append((line.strip(), []))
            continue
        m = re.fullmatch(r"\s+(\d+) (.*)", line)
        if m is None or not result:
            sys.exit(f"corpus.py: unexpected verse line {line!r}")
        verse = re.sub(r"\s+", " ", m.group(2)).strip()
        if verse:
            result[-1][1].append(verse)
    return result


def render(chs):
    return "\n".join(h + "\n" + "\n".join(vs) + "\n" for h, vs in chs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "data"))
    a = ap.parse_args()
    chs = chapters(read_bible())
    n_verses = sum(len(v) for _, v in chs)
    if len(chs) != 1189 or n_verses != 31102:
        sys.exit(f"corpus.py: expected 1189 chapters / 31102 verses, got {len(chs)} / {n_verses}")
    test = [c for i, c in enumerate(chs) if i % TEST_EVERY == TEST_OFFSET]
    train = [c for i, c in enumerate(chs) if i % TEST_EVERY != TEST_OFFSET]
    os.makedirs(a.out, exist_ok=True)
    manifest = {"source": "Debian bible-kjv-text (/usr/lib/bible.data via `bible`), King James Version, public domain",
                "split": f"chapter index % {TEST_EVERY} == {TEST_OFFSET} held out",
                "files": {}}
    for name, part in (("kjv-train.txt", train), ("kjv-test.txt", test)):
        text = render(part)
        data = text.encode("ascii")
        with open(os.path.join(a.out, name), "wb") as f:
            f.write(data)
        manifest["files"][name] = {"chapters": len(part), "bytes": len(data),
                                   "sha256": hashlib.sha256(data).hexdigest(),
                                   "headings": [h for h, _ in part] if name.endswith("test.txt") else None}
        print(f"{name}: {len(part)} chapters, {len(data)} bytes")
    with open(os.path.join(a.out, "corpus.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
