#!/usr/bin/env python3
"""A SPIN trail of file_transfer.pml as a ladder, sender on the left, receiver on the right.

Reads what `spin -T -t file_transfer.pml` prints while it replays a trail and keeps the model's
ladder lines, "L: " then who and what:
  S> text   the sender posts a message or a WRITE (an arrow to the right)
  R> text   the receiver posts one (an arrow to the left)
  S. text   something the sender does or decides
  R. text   something the receiver does or decides
  X. text   the connection itself
"""
import sys

WIDTH = 56  # between the two bars


def arrow_right(text):
    return "|-- " + text + " " + "-" * max(WIDTH - len(text) - 5, 2) + ">|"


def arrow_left(text):
    return "|<- " + text + " " + "-" * max(WIDTH - len(text) - 4, 2) + "|"


def ladder(lines):
    out = ["sender" + " " * (WIDTH + 2 - len("sender") - len("receiver")) + "receiver"]
    for line in lines:
        if not line.startswith("L: ") or len(line) < 6:
            continue
        who, text = line[3:5], line[6:].rstrip("\n")
        if who == "S>":
            out.append(arrow_right(text))
        elif who == "R>":
            out.append(arrow_left(text))
        elif who == "S.":
            out.append("| " + text.ljust(WIDTH - 1) + "|")
        elif who == "R.":
            out.append("|" + text.rjust(WIDTH - 1) + " |")
        else:
            out.append("~" * 4 + " " + text + " " + "~" * max(WIDTH - len(text) - 4, 2))
    return out


if __name__ == "__main__":
    print("\n".join(ladder(sys.stdin)))
