"""Skip-and-count reporting of bad input for the dataset builders.

Every problem names the file, the place in it (``line 12``, ``key 'video9'``) and the
offending value. By default a problem skips the record and is counted; the summary at the
end lists the counts per kind with the first ``examples`` of each and, when there are more,
says how many and where the full list is (:meth:`Reporter.report_text`, which a builder
writes to a file). With ``strict=True`` (``--strict``) the first problem raises
:class:`BuildError`. Count mismatches against published numbers are warnings (errors
under ``--strict``); notes are facts worth knowing that are not problems.
"""

from __future__ import annotations

from collections import Counter, defaultdict


class BuildError(ValueError):
    """Bad input under ``--strict``, or input a build cannot go on from."""


class NothingToBuild(BuildError):
    """Every record was skipped as bad: the builder prints the problems before the error."""


def not_utf8(path, error: UnicodeDecodeError) -> BuildError:
    """The error for a release file that is not UTF-8 text."""
    return BuildError(
        f"{path}: not UTF-8 text (byte 0x{error.object[error.start]:02x} at offset "
        f"{error.start}); re-save it as UTF-8"
    )


def _show(value, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Reporter:
    """Collect problems, warnings and notes of one build."""

    def __init__(self, strict: bool = False, examples: int = 3):
        self.strict = strict
        self.examples = examples
        self.counts: Counter = Counter()
        self.messages: dict[str, list[str]] = defaultdict(list)
        self.warnings: list[str] = []
        self.notes: list[str] = []
        self.details: list[str] = []  # lines only the full report holds

    def problem(self, kind: str, file, where: str, value, fix: str = "") -> None:
        """One bad record: raise under strict, else skip it and count it under ``kind``."""
        message = f"{file}, {where}: {kind}: {_show(value)}" + (f" ({fix})" if fix else "")
        if self.strict:
            raise BuildError(
                message + " [--strict stops at the first problem; without it "
                "bad records are skipped and counted]"
            )
        self.counts[kind] += 1
        self.messages[kind].append(message)

    def warn(self, message: str) -> None:
        """Something suspicious about the whole build (an error under strict)."""
        if self.strict:
            raise BuildError(message + " [--strict turns this warning into an error]")
        self.warnings.append(message)

    def note(self, message: str) -> None:
        self.notes.append(message)

    def check_counts(self, source: str, expected: dict[str, int], got: dict[str, int]) -> None:
        """Compare counts with the published ones; one warning lists every mismatch."""
        wrong = [
            f"{what}: expected {want}, got {got.get(what, 0)}"
            for what, want in expected.items()
            if got.get(what, 0) != want
        ]
        if wrong:
            self.warn(f"{source}: counts differ from the published ones: " + "; ".join(wrong))
        elif expected:
            self.note(f"{source}: counts match the published ones ({len(expected)} checked)")

    @property
    def skipped(self) -> int:
        return sum(self.counts.values())

    def summary(self, report=None, everything: bool = False) -> str:
        """A readable summary: skipped records by kind (the first ``examples`` of each, then
        how many more and, with ``report``, the file that lists them; all of them with
        ``everything``), warnings, notes."""
        lines = []
        if self.counts:
            lines.append(f"skipped {self.skipped} bad record(s):")
            for kind, count in self.counts.most_common():
                shown = count if everything else min(count, self.examples)
                lines.append(f"  {kind}: {count}")
                lines += [f"    e.g. {m}" for m in self.messages[kind][:shown]]
                if count > shown:
                    where = f": see {report}" if report else ""
                    lines.append(f"    and {count - shown} more{where}")
        else:
            lines.append("no bad records")
        lines += [f"warning: {w}" for w in self.warnings]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def report_text(self) -> str:
        """Everything: every skipped record by kind, warnings, notes, then the details."""
        lines = [f"skipped {self.skipped} bad record(s)"]
        for kind, count in self.counts.most_common():
            lines += ["", f"{kind}: {count}", *(f"  {m}" for m in self.messages[kind])]
        lines += ["", *(f"warning: {w}" for w in self.warnings)] if self.warnings else []
        lines += ["", *(f"note: {n}" for n in self.notes)] if self.notes else []
        lines += ["", *self.details] if self.details else []
        return "\n".join(lines) + "\n"

    def as_dict(self) -> dict:
        """What goes into ``rudder.json`` (``extra.build``)."""
        return {
            "skipped": dict(self.counts),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }


def line_ranges(numbers, limit: int | None = None, report=None) -> str:
    """Sorted line numbers as ranges (``3-5, 9``); past ``limit`` ranges, how many lines
    more and, with ``report``, the file that lists them all."""
    numbers = sorted(set(numbers))
    ranges: list[list[int]] = []
    for n in numbers:
        if ranges and n == ranges[-1][1] + 1:
            ranges[-1][1] = n
        else:
            ranges.append([n, n])
    shown = ranges if limit is None else ranges[:limit]
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in shown)
    if len(shown) < len(ranges):
        rest = sum(b - a + 1 for a, b in ranges[len(shown):])
        text += f" and {rest} more line(s)" + (f": see {report}" if report else "")
    return text
