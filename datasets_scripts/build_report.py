"""Skip-and-count reporting of bad input for the dataset builders.

Every problem names the file, the place in it (``line 12``, ``key 'video9'``) and the
offending value. By default a problem skips the record and is counted; the summary at the
end lists the counts with a few examples each. With ``strict=True`` (``--strict``) the first
problem raises :class:`BuildError`. Count mismatches against published numbers are warnings
(errors under ``--strict``); notes are facts worth knowing that are not problems.
"""

from __future__ import annotations

from collections import Counter, defaultdict


class BuildError(ValueError):
    """Bad input under ``--strict``, or input a build cannot go on from."""


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
        self.shown: dict[str, list[str]] = defaultdict(list)
        self.warnings: list[str] = []
        self.notes: list[str] = []

    def problem(self, kind: str, file, where: str, value, fix: str = "") -> None:
        """One bad record: raise under strict, else skip it and count it under ``kind``."""
        message = f"{file}, {where}: {kind}: {_show(value)}" + (f" ({fix})" if fix else "")
        if self.strict:
            raise BuildError(
                message + " [--strict stops at the first problem; without it "
                "bad records are skipped and counted]"
            )
        self.counts[kind] += 1
        if len(self.shown[kind]) < self.examples:
            self.shown[kind].append(message)

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

    def summary(self) -> str:
        """A readable summary: skipped records by kind (with examples), warnings, notes."""
        lines = []
        if self.counts:
            lines.append(f"skipped {self.skipped} bad record(s):")
            for kind, count in self.counts.most_common():
                lines.append(f"  {kind}: {count}")
                lines += [f"    e.g. {example}" for example in self.shown[kind]]
        else:
            lines.append("no bad records")
        lines += [f"warning: {w}" for w in self.warnings]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def as_dict(self) -> dict:
        """What goes into ``rudder.json`` (``extra.build``)."""
        return {
            "skipped": dict(self.counts),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }
