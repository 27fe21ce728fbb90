"""Readable output: times in units that fit them, aligned tables, failures told once."""


def format_time(ns: float) -> str:
    """A duration in the unit that fits it: '114.3 us', '15.52 us', '3.14 ms', '15.7 s'."""
    unit, scale = next((u, f) for u, f in (("s", 1e9), ("ms", 1e6), ("us", 1e3)) if ns >= f or u == "us")
    value = ns / scale
    decimals = 2 if value < (100 if unit == "us" else 10) else 1 if value < (1000 if unit == "us" else 100) else 0
    return f"{value:.{decimals}f} {unit}"


def table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """Rows of cells under headers, each column as wide as its widest cell; the last `left` columns
    are aligned left (text), the others right (numbers). A row may have fewer cells (a failure)."""
    widths = [max(len(str(row[i])) for row in (headers, *rows) if i < len(row)) for i in range(len(headers))]
    lines = []
    for row in (headers, *rows):
        cells = []
        for i, cell in enumerate(row):
            text = str(cell)
            last = i == len(row) - 1
            if i >= len(headers) - left:
                cells.append(text if last else text.ljust(widths[i]))
            else:
                cells.append(text.rjust(widths[i]))
        lines.append("  ".join(cells))
    return "\n".join(lines)


class FailureLog:
    """Prints a failure's traceback the first time it is seen in a run, and one line for each case.

    A failure message is its first line (`Type: message`) followed by the traceback; two failures
    through the same frames (the same code path) are one failure told once."""

    def __init__(self):
        self._seen = set()

    def explain(self, message: str) -> str | None:
        """The traceback to print for this failure, or None when it was printed before."""
        _, _, trace = message.partition("\n")
        if not trace.strip():
            return None
        key = tuple(line for line in trace.splitlines() if line.lstrip().startswith("File ")) or trace
        if key in self._seen:
            return None
        self._seen.add(key)
        return trace.rstrip()


def first_line(message: str) -> str:
    return message.splitlines()[0] if message else "unknown error"
