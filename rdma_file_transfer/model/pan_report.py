#!/usr/bin/env python3
"""What a SPIN verifier (pan) reported, in one line, and whether it is what check expects.

  pan_report.py OUT --holds           pan found no error
  pan_report.py OUT --fails-on TEXT   pan found an assertion violated, and TEXT is part of it

Prints the states and seconds (--holds) or the assertion (--fails-on); exits 0 when the report is the
one expected, 1 otherwise.
"""
import re
import sys


def report(text):
    def first(pattern):
        m = re.search(pattern, text, re.M)
        return m.group(1) if m else None

    return {
        "errors": first(r"errors: (\d+)"),
        "states": first(r"^\s*(\S+) states, stored"),
        "seconds": first(r"^pan: elapsed time (\S+) seconds"),
        "assertion": first(r"(assertion violated.*?)\s*\(at depth \d+\)"),
        "depth": first(r"assertion violated.*\(at depth (\d+)\)"),
    }


def main(argv):
    if len(argv) < 3 or argv[2] not in ("--holds", "--fails-on") or (argv[2] == "--fails-on") != (len(argv) == 4):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8", errors="replace") as f:
        r = report(f.read())
    if argv[2] == "--holds":
        print(f"{r['states']} states, {r['seconds']} s")
        return 0 if r["errors"] == "0" else 1
    if r["assertion"] is None:
        print(f"no assertion violated ({r['errors']} errors)")
        return 1
    print(f"{r['assertion']}, a trail of {r['depth']} steps")
    return 0 if argv[3] in r["assertion"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
