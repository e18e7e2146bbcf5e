"""The annotation store: pair labels in SQLite (WAL), safe for concurrent annotators.

Every label is one appended row ``(dataset, annotator, caption_id_a, caption_id_b, label,
time)``; relabelling a pair appends another row and undo marks an annotator's newest row
as undone, so the *current* label of a pair for an annotator is its newest row that is not
undone. Each write is its own ``BEGIN IMMEDIATE`` transaction committed with
``synchronous=FULL``: two annotators writing at once wait for each other (``busy_timeout``)
instead of failing, and a server killed mid-session keeps every label it acknowledged.
Each thread (Gradio runs handlers in a thread pool) keeps its own connection.

A *claim* reserves the pair a browser tab (a session) shows, so that two tabs of one
annotator never show, and so never label, the same pair: :meth:`AnnotationStore.claim`
picks the first pair that is neither labelled by the annotator nor claimed by another of
their sessions and claims it, in one transaction. A session holds one claim at a time; a
claim expires after ``claim_seconds`` (a closed tab frees its pair).

*Queues* (:mod:`app.pair_queue`) are stored per dataset and strategy as ordered rows, each
with how many annotators should label the pair (``copies``: 2 for the share of pairs shown
to two annotators, for agreement) and how many have a current label of it (``labels``,
kept up to date by :meth:`AnnotationStore.add` and :meth:`AnnotationStore.undo` in the same
transaction as the label). :meth:`AnnotationStore.claim_from_queue` finds the first open
row through a partial index over the rows still short of labels, so asking for the next
pair costs an index seek, whatever the queue's length and however many labels exist.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import zlib
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from rudder.errors import RudderError
from rudder.labels import PAIR_LABELS, PairLabel

LABEL_NAMES = {int(label): label.text for label in PairLabel}
SCHEMA = """
CREATE TABLE IF NOT EXISTS labels (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL,
    annotator TEXT NOT NULL,
    caption_id_a TEXT NOT NULL,
    caption_id_b TEXT NOT NULL,
    label INTEGER NOT NULL CHECK (label BETWEEN 0 AND 3),
    time TEXT NOT NULL,
    undone INTEGER NOT NULL DEFAULT 0,
    session TEXT
);
CREATE INDEX IF NOT EXISTS labels_pair ON labels (dataset, annotator, caption_id_a, caption_id_b);
CREATE VIEW IF NOT EXISTS current_labels AS
    SELECT l.* FROM labels l
    WHERE l.undone = 0 AND l.id = (
        SELECT MAX(m.id) FROM labels m
        WHERE m.undone = 0 AND m.dataset = l.dataset AND m.annotator = l.annotator
          AND m.caption_id_a = l.caption_id_a AND m.caption_id_b = l.caption_id_b);
CREATE TABLE IF NOT EXISTS claims (
    session TEXT PRIMARY KEY,
    dataset TEXT NOT NULL,
    annotator TEXT NOT NULL,
    caption_id_a TEXT NOT NULL,
    caption_id_b TEXT NOT NULL,
    expires REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS claims_pair ON claims (dataset, annotator, caption_id_a, caption_id_b);
CREATE INDEX IF NOT EXISTS labels_by_pair ON labels (dataset, caption_id_a, caption_id_b);
CREATE INDEX IF NOT EXISTS claims_by_pair ON claims (dataset, caption_id_a, caption_id_b);
CREATE TABLE IF NOT EXISTS queue (
    dataset TEXT NOT NULL,
    strategy TEXT NOT NULL,
    position INTEGER NOT NULL,
    caption_id_a TEXT NOT NULL,
    caption_id_b TEXT NOT NULL,
    lang_a TEXT NOT NULL,
    lang_b TEXT NOT NULL,
    copies INTEGER NOT NULL,
    labels INTEGER NOT NULL DEFAULT 0,
    value REAL,
    heuristic INTEGER,
    model_rank INTEGER,
    PRIMARY KEY (dataset, strategy, position)
);
CREATE INDEX IF NOT EXISTS queue_open ON queue (dataset, strategy, position)
    WHERE labels < copies;
CREATE INDEX IF NOT EXISTS queue_labelled ON queue (dataset, strategy) WHERE labels > 0;
CREATE INDEX IF NOT EXISTS queue_doubled ON queue (dataset, strategy, labels) WHERE copies > 1;
CREATE INDEX IF NOT EXISTS queue_pair ON queue (dataset, caption_id_a, caption_id_b);
CREATE TABLE IF NOT EXISTS queues (
    dataset TEXT NOT NULL,
    strategy TEXT NOT NULL,
    key TEXT NOT NULL,
    built TEXT NOT NULL,
    size INTEGER NOT NULL,
    share REAL NOT NULL,
    PRIMARY KEY (dataset, strategy)
);
"""
QUEUE_COLUMNS = ("caption_id_a", "caption_id_b", "lang_a", "lang_b", "value", "heuristic",
                 "model_rank")
LABEL_COLUMNS = ("dataset", "annotator", "caption_id_a", "caption_id_b", "label", "time", "undone")
CLAIM_SECONDS = 600.0
MAX_NAME = 100


class AnnotationError(RudderError):
    """An annotator name, label, caption id or database file the store cannot accept."""


def check_annotator(name: str) -> str:
    """A stripped, non-empty annotator name of at most ``MAX_NAME`` characters."""
    name = (name or "").strip()
    if not name:
        raise AnnotationError("enter an annotator name before labelling")
    if len(name) > MAX_NAME:
        raise AnnotationError(f"annotator name is longer than {MAX_NAME} characters")
    return name


def label_code(label) -> int:
    """``0..3`` from a label name (negative, partial, positive, description) or code."""
    if isinstance(label, str) and label in PAIR_LABELS:
        return PAIR_LABELS[label]
    if isinstance(label, int) and label in LABEL_NAMES:
        return label
    raise AnnotationError(f"unknown label {label!r}; use one of {list(PAIR_LABELS)}")


class AnnotationStore:
    """Pair labels in the SQLite file ``path`` (created with its schema on first use)."""

    def __init__(self, path, busy_timeout: float = 30.0, claim_seconds: float = CLAIM_SECONDS):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.busy_timeout = busy_timeout
        self.claim_seconds = claim_seconds
        self.clock = time.time
        self._local = threading.local()
        try:
            with self._connect() as db:
                self._use_wal(db)
                db.executescript(SCHEMA)
                columns = {row[1] for row in db.execute("PRAGMA table_info(labels)")}
        except sqlite3.Error as error:
            raise AnnotationError(
                f"{self.path}: not an annotation database ({error}); "
                "pass --db a new or existing annotation file"
            ) from None
        missing = [c for c in LABEL_COLUMNS if c not in columns]
        if missing:
            raise AnnotationError(
                f"{self.path}: its 'labels' table lacks column(s) {missing}, so it is not an "
                "annotation database; pass --db a new or existing annotation file"
            )
        if "session" not in columns:  # a file from before undo was per tab
            with self._write() as db:
                if "session" not in {row[1] for row in db.execute("PRAGMA table_info(labels)")}:
                    db.execute("ALTER TABLE labels ADD COLUMN session TEXT")

    def _use_wal(self, db) -> None:
        """Switch the file to WAL. While another process sets up a new file, SQLite answers
        'database is locked' at once instead of waiting (the busy handler is not called for
        this switch), so it is retried until ``busy_timeout``."""
        deadline, delay = time.monotonic() + self.busy_timeout, 0.005
        while True:
            try:
                db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
            time.sleep(delay)
            delay = min(2 * delay, 0.2)

    @contextmanager
    def _connect(self):
        """This thread's connection (autocommit mode: transactions are explicit)."""
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
            db.execute("PRAGMA synchronous=FULL")
            db.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
            self._local.db = db
        yield db

    @contextmanager
    def _write(self):
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def add(
        self,
        dataset: str,
        annotator: str,
        caption_id_a: str,
        caption_id_b: str,
        label,
        session: str | None = None,
    ) -> int:
        """Record a label; returns its row id once committed.

        With ``session``, a pair claimed by another live session of the annotator (another
        tab) is refused.
        """
        annotator, code = check_annotator(annotator), label_code(label)
        if not caption_id_a or not caption_id_b:
            raise AnnotationError("both caption ids are needed to record a label")
        if caption_id_a == caption_id_b:
            raise AnnotationError(f"caption {caption_id_a!r} cannot be labelled against itself")
        stamp = datetime.now(timezone.utc).isoformat(timespec="microseconds")
        with self._write() as db:
            pair = (dataset, annotator, caption_id_a, caption_id_b)
            if session is not None and caption_id_b in self._claimed_by_others(
                db, *pair[:3], session
            ):
                raise AnnotationError(
                    f"{caption_id_a} / {caption_id_b} is open in another tab of {annotator}; "
                    "label it there"
                )
            had = self._has_label(db, *pair)
            cursor = db.execute(
                "INSERT INTO labels (dataset, annotator, caption_id_a, caption_id_b, label, time,"
                " session) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (*pair, code, stamp, session),
            )
            if not had:
                self._count_label(db, dataset, caption_id_a, caption_id_b, +1)
            return int(cursor.lastrowid)

    @staticmethod
    def _has_label(db, dataset, annotator, caption_id_a, caption_id_b) -> bool:
        """Whether the annotator has a current (live) label of the pair."""
        return db.execute(
            "SELECT 1 FROM labels WHERE dataset = ? AND annotator = ? AND caption_id_a = ?"
            " AND caption_id_b = ? AND undone = 0 LIMIT 1",
            (dataset, annotator, caption_id_a, caption_id_b),
        ).fetchone() is not None

    @staticmethod
    def _count_label(db, dataset, caption_id_a, caption_id_b, change: int) -> None:
        """One annotator more (``+1``) or fewer (``-1``) with a label of the pair, in every
        queue that holds it."""
        db.execute(
            "UPDATE queue SET labels = MAX(labels + ?, 0) WHERE dataset = ? AND caption_id_a = ?"
            " AND caption_id_b = ?",
            (change, dataset, caption_id_a, caption_id_b),
        )

    def claim(
        self,
        session: str,
        dataset: str,
        annotator: str,
        caption_id_a: str,
        candidates,
        force: bool = False,
    ) -> str | None:
        """Claim for ``session`` the first of ``candidates`` (caption ids, in order) that the
        annotator has not labelled against ``caption_id_a`` and no other live session of
        theirs claims; with ``force``, the first candidate whatever its state (other claims
        on it are dropped). Releases the session's previous claim; returns the claimed id,
        or None when none is free.
        """
        annotator = check_annotator(annotator)
        query = (dataset, annotator, caption_id_a)
        now = self.clock()
        with self._write() as db:
            db.execute("DELETE FROM claims WHERE expires <= ? OR session = ?", (now, session))
            taken = set()
            if not force:
                taken = self._claimed_by_others(db, *query, session) | self._labelled(db, *query)
            chosen = next((c for c in candidates if c not in taken), None)
            if chosen is not None:
                db.execute(
                    "DELETE FROM claims WHERE dataset = ? AND annotator = ? AND caption_id_a = ?"
                    " AND caption_id_b = ?",
                    (*query, chosen),
                )
                db.execute(
                    "INSERT INTO claims (session, dataset, annotator, caption_id_a, caption_id_b,"
                    " expires) VALUES (?, ?, ?, ?, ?, ?)",
                    (session, *query, chosen, now + self.claim_seconds),
                )
        return chosen

    def _claimed_by_others(self, db, dataset, annotator, caption_id_a, session) -> set[str]:
        rows = db.execute(
            "SELECT caption_id_b FROM claims WHERE dataset = ? AND annotator = ?"
            " AND caption_id_a = ? AND session != ? AND expires > ?",
            (dataset, annotator, caption_id_a, session, self.clock()),
        ).fetchall()
        return {row[0] for row in rows}

    @staticmethod
    def _labelled(db, dataset, annotator, caption_id_a) -> set[str]:
        rows = db.execute(
            "SELECT DISTINCT caption_id_b FROM current_labels"
            " WHERE dataset = ? AND annotator = ? AND caption_id_a = ?",
            (dataset, annotator, caption_id_a),
        ).fetchall()
        return {row[0] for row in rows}

    def undo(self, dataset: str, annotator: str, session: str | None = None) -> dict | None:
        """Mark the annotator's newest live label in ``dataset`` undone (with ``session``:
        the newest that session made, so one tab never undoes another's); returns it (or
        None)."""
        annotator = check_annotator(annotator)
        where, args = "dataset = ? AND annotator = ? AND undone = 0", [dataset, annotator]
        if session is not None:
            where, args = where + " AND session = ?", [*args, session]
        with self._write() as db:
            row = db.execute(
                "SELECT id, caption_id_a, caption_id_b, label FROM labels"
                f" WHERE {where} ORDER BY id DESC LIMIT 1",
                args,
            ).fetchone()
            if row is None:
                return None
            db.execute("UPDATE labels SET undone = 1 WHERE id = ?", (row[0],))
            if not self._has_label(db, dataset, annotator, row[1], row[2]):
                self._count_label(db, dataset, row[1], row[2], -1)
        return {"id": row[0], "caption_id_a": row[1], "caption_id_b": row[2], "label": row[3]}

    def current(
        self,
        dataset: str | None = None,
        annotator: str | None = None,
        caption_id_a: str | None = None,
    ) -> list[dict]:
        """Current labels (newest live row per annotator and pair), oldest first."""
        where, args = [], []
        for column, value in (
            ("dataset", dataset),
            ("annotator", annotator),
            ("caption_id_a", caption_id_a),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        clause = (" WHERE " + " AND ".join(where)) if where else ""
        with self._connect() as db:
            cursor = db.execute(
                "SELECT id, dataset, annotator, caption_id_a, caption_id_b, label, time"
                f" FROM current_labels{clause} ORDER BY id",
                args,
            )
            names = [column[0] for column in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def labelled_candidates(self, dataset: str, annotator: str, caption_id_a: str) -> set[str]:
        """Caption ids the annotator currently has a label for against ``caption_id_a``."""
        with self._connect() as db:
            return self._labelled(db, dataset, annotator, caption_id_a)

    def labelled_pairs(self, dataset: str, annotator: str) -> list[tuple[str, str]]:
        """``(caption_id_a, caption_id_b)`` of every current label of one annotator."""
        with self._connect() as db:
            return db.execute(
                "SELECT caption_id_a, caption_id_b FROM current_labels"
                " WHERE dataset = ? AND annotator = ?",
                (dataset, annotator),
            ).fetchall()

    def counts_by_query(self, dataset: str, annotator: str) -> dict[str, int]:
        """Number of current labels per query caption for one annotator."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT caption_id_a, COUNT(*) FROM current_labels"
                " WHERE dataset = ? AND annotator = ? GROUP BY caption_id_a",
                (dataset, annotator),
            ).fetchall()
        return dict(rows)

    def annotators(self, dataset: str | None = None) -> list[str]:
        """Annotators with at least one current label (in ``dataset`` when given)."""
        clause, args = ("WHERE dataset = ?", (dataset,)) if dataset is not None else ("", ())
        with self._connect() as db:
            rows = db.execute(
                f"SELECT DISTINCT annotator FROM current_labels {clause} ORDER BY annotator", args
            ).fetchall()
        return [row[0] for row in rows]

    # ------------------------------------------------------------------ queues
    def replace_queue(self, dataset: str, strategy: str, rows, key: str, share: float) -> int:
        """Store a queue (``rows``: tuples of :data:`QUEUE_COLUMNS`, first to label first) in
        place of the earlier one of ``dataset`` and ``strategy``, in one transaction; a pair is
        shown to two annotators when its :func:`doubled` hash falls in ``share``. Label counts
        are taken from the current labels. Returns the number of rows."""
        rows = [(dataset, strategy, position, *row[:4], 2 if doubled(row[0], row[1], share) else 1,
                 *row[4:]) for position, row in enumerate(rows)]
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self._write() as db:
            db.execute("DELETE FROM queue WHERE dataset = ? AND strategy = ?", (dataset, strategy))
            db.executemany(
                "INSERT INTO queue (dataset, strategy, position, caption_id_a, caption_id_b,"
                " lang_a, lang_b, copies, value, heuristic, model_rank)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            db.execute(
                "UPDATE queue SET labels = counted.n FROM (SELECT caption_id_a AS a,"
                " caption_id_b AS b, COUNT(DISTINCT annotator) AS n FROM labels"
                " WHERE dataset = ? AND undone = 0 GROUP BY caption_id_a, caption_id_b) AS counted"
                " WHERE queue.dataset = ? AND queue.strategy = ? AND queue.caption_id_a = counted.a"
                " AND queue.caption_id_b = counted.b",
                (dataset, dataset, strategy),
            )
            db.execute(
                "INSERT OR REPLACE INTO queues (dataset, strategy, key, built, size, share)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (dataset, strategy, key, stamp, len(rows), share),
            )
        return len(rows)

    def queue_info(self, dataset: str, strategy: str) -> dict | None:
        """``key``, ``built``, ``size`` and ``share`` of a stored queue, None when none is."""
        with self._connect() as db:
            row = db.execute(
                "SELECT key, built, size, share FROM queues WHERE dataset = ? AND strategy = ?",
                (dataset, strategy),
            ).fetchone()
        return None if row is None else dict(zip(("key", "built", "size", "share"), row,
                                                 strict=True))

    def claim_from_queue(
        self,
        session: str | None,
        dataset: str,
        annotator: str,
        strategy: str,
        after: int = -1,
        lang_mode: tuple[str, str | None] = ("any", None),
    ) -> dict | None:
        """Claim for ``session`` the first pair of the queue after position ``after``
        (wrapping around) that still needs a label, that the annotator has not labelled, and
        that no other session claims beyond its copies (none of the annotator's other tabs
        claims it); returns its row (``position``, the pair, ``labels``, ``copies``, ...) or
        None. ``lang_mode``: ``("any", None)``, ``("same", None)`` (the candidate in the
        query's language) or ``("lang", CODE)`` (candidates in CODE)."""
        annotator = check_annotator(annotator)
        session = session or f"no-session:{annotator}"
        kind, code = lang_mode
        language = {"any": "", "same": " AND q.lang_a = q.lang_b",
                    "lang": " AND q.lang_b = :code"}[kind]
        now = self.clock()
        query = (
            "SELECT q.position, q.caption_id_a, q.caption_id_b, q.labels, q.copies, q.value,"
            " q.heuristic, q.model_rank FROM queue q INDEXED BY queue_open"
            " WHERE q.dataset = :dataset AND q.strategy = :strategy AND q.labels < q.copies"
            f" AND q.position > :after{language}"
            " AND NOT EXISTS (SELECT 1 FROM labels l WHERE l.dataset = q.dataset"
            "  AND l.annotator = :annotator AND l.caption_id_a = q.caption_id_a"
            "  AND l.caption_id_b = q.caption_id_b AND l.undone = 0)"
            " AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.dataset = q.dataset"
            "  AND c.annotator = :annotator AND c.caption_id_a = q.caption_id_a"
            "  AND c.caption_id_b = q.caption_id_b AND c.session != :session"
            "  AND c.expires > :now)"
            " AND q.labels + (SELECT COUNT(*) FROM claims c WHERE c.dataset = q.dataset"
            "  AND c.caption_id_a = q.caption_id_a AND c.caption_id_b = q.caption_id_b"
            "  AND c.annotator != :annotator AND c.expires > :now) < q.copies"
            " ORDER BY q.position LIMIT 1"
        )
        names = ("position", "caption_id_a", "caption_id_b", "labels", "copies", "value",
                 "heuristic", "model_rank")
        args = {"dataset": dataset, "strategy": strategy, "annotator": annotator,
                "session": session, "now": now, "code": code}
        with self._write() as db:
            db.execute("DELETE FROM claims WHERE expires <= ? OR session = ?", (now, session))
            row = db.execute(query, {**args, "after": after}).fetchone()
            if row is None and after >= 0:
                row = db.execute(query, {**args, "after": -1}).fetchone()
            if row is None:
                return None
            found = dict(zip(names, row, strict=True))
            db.execute(
                "INSERT INTO claims (session, dataset, annotator, caption_id_a, caption_id_b,"
                " expires) VALUES (?, ?, ?, ?, ?, ?)",
                (session, dataset, annotator, found["caption_id_a"], found["caption_id_b"],
                 now + self.claim_seconds),
            )
        return found

    def queue_row(self, dataset: str, strategy: str, caption_id_a: str,
                  caption_id_b: str) -> dict | None:
        """The queue's row of a pair (``position``, ``labels``, ``copies``, ...), None when the
        queue does not hold it."""
        names = ("position", "labels", "copies", "value", "heuristic", "model_rank")
        with self._connect() as db:
            row = db.execute(
                f"SELECT {', '.join(names)} FROM queue WHERE dataset = ? AND caption_id_a = ?"
                " AND caption_id_b = ? AND strategy = ?",
                (dataset, caption_id_a, caption_id_b, strategy),
            ).fetchone()
        return None if row is None else dict(zip(names, row, strict=True))

    def queue_progress(self, dataset: str, strategy: str) -> dict:
        """How far a queue is: ``labelled`` pairs (one label or more), ``doubled`` pairs (two
        copies) and ``double_done`` (those with both labels); counted over the labelled and
        doubled rows' partial indexes, not the whole queue."""
        with self._connect() as db:
            labelled = db.execute(
                "SELECT COUNT(*) FROM queue INDEXED BY queue_labelled WHERE dataset = ?"
                " AND strategy = ? AND labels > 0",
                (dataset, strategy),
            ).fetchone()[0]
            doubled, done = db.execute(
                "SELECT COUNT(*), COALESCE(SUM(labels >= copies), 0) FROM queue"
                " INDEXED BY queue_doubled WHERE dataset = ? AND strategy = ? AND copies > 1",
                (dataset, strategy),
            ).fetchone()
        return {"labelled": labelled, "doubled": doubled, "double_done": done}


def doubled(caption_id_a: str, caption_id_b: str, share: float) -> bool:
    """Whether a pair is among the ``share`` shown to two annotators: a CRC-32 of the pair
    (the same in every queue, on every restart) below ``share`` of its range."""
    digest = zlib.crc32(f"{caption_id_a}\t{caption_id_b}".encode())
    return digest < share * 2**32
