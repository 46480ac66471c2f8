#!/usr/bin/env python3
"""Checks a database left by bench/gpu_kill_loop.sh: SQLite's integrity check, and that run 1
measured every (context, variant) pair it decided exactly once (first passes; the winners'
re-measurements, reason "re-measurement ...", are extra by design). Prints one line per check and
exits 1 when one fails.
    python3 bench/check_kill_db.py DB"""
import sqlite3
import sys

db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
ok = True
integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
print(f"integrity_check: {integrity}")
ok &= integrity == "ok"
run = db.execute("SELECT status, message FROM runs WHERE id = 1").fetchone()
print(f"run 1: {run[0]}: {run[1]}")
ok &= run[0] == "done"
rows = db.execute(
    "SELECT context_id, variant_id, count(*) FROM measurements WHERE run_id = 1 "
    "AND reason NOT LIKE 're-measurement%' GROUP BY context_id, variant_id").fetchall()
twice = [r for r in rows if r[2] > 1]
by_status = dict(db.execute(
    "SELECT status, count(*) FROM measurements WHERE run_id = 1 GROUP BY status").fetchall())
print(f"pairs decided: {len(rows)}; measured more than once: {len(twice)}; rows by status: {by_status}")
ok &= not twice
sys.exit(0 if ok else 1)
