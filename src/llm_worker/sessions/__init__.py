"""Sessions: conversations kept in a store, loaded before a run and appended to after it.

`Session` is the protocol a Worker needs; `SqliteSession` (stdlib sqlite3, no extra) and
`PostgresSession` (psycopg 3, the `postgres` extra, imported at first use) implement it, and
`ReplaySafeSession`, what a `DurableWorker` needs more (a recovered run appends once).
Worker layer: imports the model and `state` (messages and pause states as JSON) only.
"""

from llm_worker.sessions._postgres import PostgresSession
from llm_worker.sessions._protocol import ReplaySafeSession, Session, SessionRecord
from llm_worker.sessions._sqlite import SqliteSession

__all__ = (
    "PostgresSession",
    "ReplaySafeSession",
    "Session",
    "SessionRecord",
    "SqliteSession",
)
