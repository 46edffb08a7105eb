"""Schema migrations, applied in order; PRAGMA user_version is the version.

Append a migration to change the schema; never edit one that has shipped,
since databases in the field were built from it."""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    # 1: sessions, runs with their raw probe envelopes, per-CPU noise summary.
    """
    CREATE TABLE sessions (
        id INTEGER PRIMARY KEY,
        uuid TEXT NOT NULL UNIQUE,
        command TEXT NOT NULL,
        argv TEXT NOT NULL,
        host TEXT NOT NULL,
        user TEXT,
        pid INTEGER,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        status TEXT NOT NULL
            CHECK (status IN ('running', 'complete', 'failed', 'interrupted')),
        tool_version TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        facts TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '{}',
        error TEXT
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        params TEXT NOT NULL,
        started_at TEXT NOT NULL,
        ended_at TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('complete', 'interrupted')),
        envelope TEXT NOT NULL,
        context TEXT NOT NULL DEFAULT '{}',
        UNIQUE (session_id, seq)
    );
    CREATE TABLE noise_cpu (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu INTEGER NOT NULL,
        measured_ns REAL NOT NULL,
        loops INTEGER NOT NULL,
        min_period_ns REAL NOT NULL,
        median_period_ns REAL NOT NULL,
        threshold_ns REAL NOT NULL,
        gaps INTEGER NOT NULL,
        total_gap_ns REAL NOT NULL,
        max_gap_ns REAL NOT NULL,
        lost_ns REAL NOT NULL,
        available_pct REAL NOT NULL,
        events_per_s REAL NOT NULL,
        events_dropped INTEGER NOT NULL,
        ctxsw_voluntary INTEGER NOT NULL,
        ctxsw_involuntary INTEGER NOT NULL,
        steal_ns REAL,
        PRIMARY KEY (run_id, cpu)
    );
    CREATE INDEX runs_session ON runs(session_id);
    CREATE INDEX sessions_fingerprint ON sessions(fingerprint);
    """,
    # 2: an analysis summary per run (attribution, periodic sources, stats),
    # so reports read it rather than recompute it.
    """
    ALTER TABLE runs ADD COLUMN analysis TEXT NOT NULL DEFAULT '{}';
    """,
    # 3: the lever journal: every change to the node, written before it is
    # made, so that a crash is undone at the next start.
    """
    CREATE TABLE journal (
        id INTEGER PRIMARY KEY,
        session_id INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        lever TEXT NOT NULL,
        target TEXT NOT NULL,
        old_value TEXT NOT NULL,
        new_value TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'applied', 'reverted', 'failed')),
        changed_at TEXT NOT NULL,
        reverted_at TEXT,
        note TEXT
    );
    CREATE INDEX journal_open ON journal(state);
    """,
    # 4: lasting states. 'applied' splits into 'temporary' (undone when its
    # command ends, or by the next command after a crash) and 'kept' (until
    # `tune revert`); the owner's start time tells a live process from a
    # reused pid; the kind of knob and the command that made the change.
    """
    CREATE TABLE journal_v4 (
        id INTEGER PRIMARY KEY,
        session_id INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        pid_start TEXT,
        command TEXT,
        lever TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT 'sysfs',
        target TEXT NOT NULL,
        old_value TEXT NOT NULL,
        new_value TEXT NOT NULL,
        lasting TEXT NOT NULL DEFAULT 'temporary' CHECK (lasting IN ('temporary', 'kept')),
        state TEXT NOT NULL CHECK (state IN ('pending', 'temporary', 'kept', 'reverted', 'failed')),
        changed_at TEXT NOT NULL,
        reverted_at TEXT,
        note TEXT
    );
    INSERT INTO journal_v4 (id, session_id, host, pid, lever, target, old_value, new_value, state, changed_at,
                            reverted_at, note)
        SELECT id, session_id, host, pid, lever, target, old_value, new_value,
               CASE state WHEN 'applied' THEN 'temporary' ELSE state END, changed_at, reverted_at, note
        FROM journal;
    DROP TABLE journal;
    ALTER TABLE journal_v4 RENAME TO journal;
    CREATE INDEX journal_open ON journal(state);
    """,
    # 5: references: a node's noise per CPU for one configuration, which `quietcore check` compares with.
    """
    CREATE TABLE refs (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        host TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        created_at TEXT NOT NULL,
        data TEXT NOT NULL,
        UNIQUE (name, host)
    );
    CREATE INDEX refs_fingerprint ON refs(fingerprint);
    """,
    # 6: a noise run's events out of its envelope's JSON pairs (about 50 bytes an event) into a
    # compact blob per CPU (runs.events: about 10, exact). Runs stored before keep their pairs, read as ever.
    """
    CREATE TABLE run_events (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu INTEGER NOT NULL,
        events INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (run_id, cpu)
    );
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)
