"""What ladder.py and iwarp.py read from tshark's fields: numbers, bytes, and a payload shown as text or hex."""


def number(text):
    """tshark prints integers in decimal or hex depending on the field; take either (first of a list)."""
    text = text.split(",")[0].strip()
    if not text:
        return None
    return int(text, 16) if text.lower().startswith("0x") else int(text)


def raw_bytes(text):
    text = text.split(",")[0].replace(":", "").strip()
    return bytes.fromhex(text) if text else b""


def preview(data):
    """A payload as the learner recognises it: text quoted (escaped), anything else as hex bytes."""
    text = data.rstrip(b"\0")
    if text and all(32 <= b < 127 or b in (9, 10) for b in text):
        shown = text[:32].decode().replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        return f'"{shown}"' + ("..." if len(text) > 32 else "")
    return "[" + " ".join(f"{b:02x}" for b in data[:8]) + (" ...]" if len(data) > 8 else "]")
