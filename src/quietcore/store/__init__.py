"""SQLite results database: sessions, runs, raw probe output, summaries."""
