"""The one escaping every name rnnir prints goes through: terminal-safe, CI-log-safe text."""

from __future__ import annotations

__all__ = ["printable", "printable_lines"]


def printable(text: str) -> str:
    """``text`` safe to print on a terminal or into a CI log: control characters (newlines, ESC, BEL, CR,
    bidi overrides) and bytes that were not valid UTF-8 in a file name (surrogate escapes) become visible
    backslash escapes, and a line that would start a GitHub workflow command (``::set-env``, ``::error``,
    also after spaces) has its first colon escaped.  Every name rnnir prints goes through here."""
    if text.isprintable():
        return _no_workflow_command(text)
    out: list[str] = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for an undecodable byte
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x100:
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch, f"\\x{code:02x}"))
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return _no_workflow_command("".join(out))


def _no_workflow_command(line: str) -> str:
    # GitHub's runner reads a log line as a command when it starts with "::" after leading whitespace
    stripped = line.lstrip()
    if stripped.startswith("::"):
        return line[: len(line) - len(stripped)] + "\\x3a" + stripped[1:]
    return line


def printable_lines(text: str) -> str:
    """:func:`printable` applied to each line of ``text``, its line breaks kept."""
    return "\n".join(map(printable, text.split("\n")))
