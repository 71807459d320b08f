"""Contract clauses as ``id -> one sentence``: what tests cite and ``-k`` selects.

The ids are those of CONTRACT.md; the sentences are short restatements for
reports and test listings, the contract stays normative. A meta-test fails when a
check or a ``@pytest.mark.clause(...)`` names an id missing here, or when a
required clause has no check or test citing it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CLAUSES", "clause_family"]

CLAUSES: Final[dict[str, str]] = {
    # 1. Data model
    "D1": "Entries and metas are JSON objects persisted as text and parsed afresh on every read.",
    "D2": "A value that is not JSON raises before anything becomes durable and persists nothing.",
    "D3": "Mutating an argument after a write, or a value a read returned, never changes stored state.",
    "D4": "A store reads only an entry's seq; every other field passes through untouched.",
    "D5": "A finite seq is a non-bool int or finite float; entries without one skip the seq guard.",
    "D6": "Every meta key, documented or unknown, round-trips exactly as one JSON record.",
    "D7": "meta_matches_filter honours status or statuses, an exact name and every requested tag.",
    "D8": "Lease expiry is decided by an injectable clock in Unix epoch milliseconds.",
    "D9": "ttl_ms is an int from 1 to 2_147_483_647, else ConfigError before anything is opened.",
    # 2. JournalStore and meta
    "J1": "An append is all or nothing: no reader ever sees a partial entry.",
    "J2": "load returns successful appends in one stable total order, concurrent ones serialized.",
    "J3": "Once append returns, the next load includes the entry.",
    "J4": "Payloads round-trip opaquely: unknown kinds and keys, unicode, floats, legacy entries.",
    "J5": "load of a run never written returns an empty list.",
    "J6": "An append whose seq is not above every stored seq raises JournalOrderViolation atomically; seqs compare exactly as integers, beyond 64 bits included (no float rounding).",
    "J7": "A leased append checks run match, then the fence, then the seq guard, in one unit.",
    "J8": "An unleased append is single-writer use: not fenced, still seq-guarded.",
    "M1": "Meta lives apart from entries; list_runs never parses journal payloads.",
    "M2": "put_meta replaces the whole record of its run; there is one record per run.",
    "M3": "Meta records round-trip exactly (D6).",
    "M4": "list_runs honours status, name and tags exactly and never drops a statuses match.",
    "M5": "get_meta agrees with list_runs and returns None for a run without meta.",
    "M6": "delete removes a run's entries, meta and lease row together and keeps its epoch.",
    # 3. LeasableStore
    "L1": "acquire of a live lease raises LeaseHeldError; a free or expired run is granted, expired meaning now >= expires_at (expires_at == now is expired).",
    "L2": "acquire reads, bumps the epoch and writes the lease row as one serialized unit.",
    "L3": "Every acquire returns an epoch above every epoch the run id ever had.",
    "L4": "The epoch counter is its own record; release and expiry never reset it.",
    "L5": "The epoch counter survives delete, so a deleted incarnation's owner stays fenced.",
    "L6": "Renew, release and leased writes succeed only for the live lease's owner and epoch; an expired lease is not live even when nobody took the run over: it can neither write nor renew (acquire again).",
    "L7": "The fence check and the guarded mutation commit as one transaction.",
    "L8": "renew extends the lease by the ttl; renewing every ttl/3 keeps it held.",
    "L9": "lease_ttl_ms exposes the configured ttl and a worker with another ttl refuses to start.",
    "L10": "A holder whose renew fails stops paid work promptly.",
    # 4. Fenced writes
    "F1": "A declaring journal store fences leased put_meta and delete exactly like append.",
    "F2": "A lease guards only the run it names; any other run is refused before anything is touched.",
    "F3": "A refused call mutates nothing any other instance could observe.",
    "F4": "Calls without a lease keep single-writer semantics on a fenced store.",
    "F5": "fenced_writes is a declared promise, never inferred, made only when the suites pass; the blob twin declares its own fenced_transcripts marker, which the journal's does not cover.",
    "F6": "A superseded segment's meta writes are refused instead of stranding the run.",
    # 5. TranscriptStore
    "T1": "Blobs are opaque bytes returned exactly; put overwrites in place.",
    "T2": "get of a missing ref returns None and delete of a missing ref is a no-op.",
    "T3": "A blob ref's run is its leading path segment.",
    "T4": "list_refs returns the sorted refs under run_id + '/' and never a slashless ref.",
    "T5": "Blob stores never cascade over a run; only delete_run removes a run's blobs.",
    "T6": "A transcript twin declares fenced_writes only when blobs and leases share one domain.",
    "T7": "transcripts() returns one memoized twin sharing the store's connection and lifecycle.",
    "T8": "File and in-memory blob stores are single-writer, undeclared, and refuse unsafe names.",
    "T9": "Run ids of file-backed stores are safe tokens, refused with ConfigError otherwise.",
    "T10": "No symbolic link inside a file store's root is followed: a call that would pass through one raises ConfigError and touches nothing outside the root.",
    # 6. SQLite
    "Q1": "SqliteStore validates its ttl before opening the database.",
    "Q2": "The SQLite schema has five idempotently created tables with the listed indexes.",
    "Q3": "Boot switches the database to WAL mode (memory for ':memory:').",
    "Q4": "Concurrent boots retry the whole bootstrap on SQLITE_BUSY within a 5 s wall bound.",
    "Q5": "Runtime contention waits up to busy_timeout_ms, then raises StoreBusyError.",
    "Q6": "Each write is run match, BEGIN IMMEDIATE, fence check, mutation, COMMIT or ROLLBACK.",
    "Q7": "The seq guard is one conditional insert; zero rows changed means JournalOrderViolation.",
    "Q8": "Renew and release pin run, owner and epoch in their WHERE inside the fenced unit.",
    "Q9": "One instance serializes its methods on its single connection with an RLock.",
    "Q10": "A ':memory:' store is private to its instance.",
    "Q11": "list_runs narrows in SQL, re-applies D7 and orders by run id; close closes the twin.",
    "Q12": "The README says one SQLite file holds everything and many local processes are safe.",
    "Q13": "The live-lease check goes through one overridable seam for race injection.",
    "Q14": "A caller of group commit interrupted while queued or leading gets its own interrupt alone: its batch-mates keep their own outcomes, no queue entry stays behind, later writers never hang.",
    "Q15": "AsyncSqliteStore's coroutines share group commit (one transaction and one COMMIT, each write with its own fence, seq guard and outcome, each caller resumed after the shared COMMIT); no SQLite statement runs on the event-loop thread.",
    "Q16": "An AsyncSqliteStore caller cancelled at any point gets CancelledError; its write is all or nothing and no transaction or file lock stays behind.",
    "Q17": "A SQLite store, sync or async, used in a forked child refuses with ForkedStoreError and leaves the parent's connection untouched.",
    "Q18": "Once its database file was removed or replaced, every write through a SQLite store raises ConfigError and writes nothing; an opener refuses a -wal left beside a missing or empty database file.",
    # 7. PostgreSQL
    "P1": "PostgresStore validates url, schema, ttl and pool size before any connection.",
    "P2": "Each store owns a schema of five TEXT-payload tables, qualified and indexed as listed.",
    "P3": "Boot is lazy, memoized and serialized by an advisory transaction lock.",
    "P4": "Run-scoped mutations take the per-run advisory lock, check the fence, mutate, commit.",
    "P5": "Expiry uses the database server clock unless a clock is injected.",
    "P6": "Many processes and hosts may share one write region, never several replicated ones.",
    "P7": "One bounded pool per store; a connection lost while idle is replaced on next checkout.",
    "P8": "Appends of one run through one instance execute in submission order.",
    "P9": "The README runbook covers whole-schema backup and restore with epochs kept.",
    "P10": "Postgres tests use a fresh schema each and drop it afterwards.",
    # 8. Conformance kit
    "C1": "Suite factories return a fresh isolated store on every call.",
    "C2": "Suites run standalone (first violation raises) or as parametrized pytest items.",
    "C3": "stable_stringify is sorted-key compact JSON without ASCII escaping.",
    "C4": "Deliberately broken stores fail the named check; honest stores pass.",
    "C5": "The minimal resolution fold classifies resolutions and abandons and hashes its state.",
    # 9. Kill points
    "K1": "The reference driver's segment: acquire, load, running meta, body, settle, release.",
    "K2": "Dispatch binds a keyed agent call to its latest unconsumed running entry.",
    "K3": "The scripted provider answers deterministically and counts every call.",
    "K4": "kp-happy and kp-limit workflows produce their documented values.",
    "K5": "The kill-point worker logs each event durably and dies at its scripted write.",
    "K6": "The referee requires death by SIGKILL, one kill event and the expected counts.",
    "K7": "Resume over a fresh instance completes with exact re-pay counts and one ok settle.",
    "K8": "kill_point_conformance yields one check per scenario with fresh isolation.",
    "K9": "Kill-point self-tests cover every scenario bracket in-process.",
    # 10. Soak
    "S1": "Each soak writer has a stable owner, a seeded PRNG and a JSONL event report.",
    "S2": "Soak attempts classify lease, order, busy and other errors with bounded retries.",
    "S3": "A soak tenure logs its grant and every accepted mutation with epoch and counter.",
    "S4": "The stale sweep tries every surface with the dead lease and expects rejection.",
    "S5": "A victim cycle exercises a side run end to end under its own lease.",
    "S6": "Soak writers loop tenures until the stop file appears.",
    "S7": "The soak referee spawns writers together and stops at quorum or cap.",
    "S8": "The soak quorum sets minimum counts of epochs, rejects and accepted writes.",
    "S9": "verify_soak_history replays accepted events against the stored state.",
    "S10": "A failed soak raises one error listing every violation.",
    "S11": "Eight processes booting one fresh store location at once all succeed, twice.",
    "S12": "In-memory stores run the soak writer only in-process, honest and broken.",
    # 11. Audit
    "A1": "last_run_settle finds the last valid run_settle; dangling entries are unreferenced running ones.",
    "A2": "audit_run derives a read-only verdict from meta, settle, tail and open suspensions.",
    "A3": "Only meta-behind and stranded runs are repaired.",
    "A4": "reconcile_run_meta rewrites status and updatedAt only, under the lease.",
    "A5": "audit_runs audits every listed run, non-consistent ones by default.",
    "A6": "runs audit prints one sanitized line per divergence and exits by what remains.",
    "A7": "Every segment appends its run_settle before the terminal meta write.",
    "A8": "The settle is appended only when something changed.",
    "A9": "A fenced settle fails with SupersededError; other failures with SettlementError.",
    # 12. Retention
    "R1": "delete_run deletes the run's blobs, then its journal, with the lease.",
    "R2": "prune_run deletes only checkpoint blobs no entry still references.",
    "R3": "A retention sweep holds a brief lease so a superseded sweep is refused.",
    "R4": "Deletion never drops the epoch counter.",
    # 13. Pitfalls
    "X1": "A superseded segment's late terminal put_meta is refused and the run stays listed.",
    "X2": "A stale checkpoint put or delete is refused; both instances read the successor's blob.",
    "X3": "A takeover cannot land between a fence check and its mutation.",
    "X4": "Journal, blob and cascade deletes with a stale lease are refused.",
    "X5": "assert_fenced_writes tells declaring stores from undeclared ones.",
    "X6": "Concurrent SQLite boots never surface a raw SQLITE_BUSY.",
    "X7": "Port traps: one handle is thread safe (calls from many threads at once, close() racing in-flight calls included: each fails typed or completes), bool seq, mutable blobs, non-JSON values.",
    # 14. asyncio API
    "Y1": "open_store_async opens every backend; async stores declare async_api and keep the sync SPI's names, records, errors and argument rules.",
    "Y2": "A caller cancelled inside a store call gets CancelledError only once the call is over, and the write is all or nothing.",
    "Y3": "After a cancelled write the store stays usable and a second handle can write at once.",
    "Y4": "A store handle used in a forked child refuses with ForkedStoreError and leaves the parent's resources alone.",
    "Y5": "The kit certifies the async path: its suites drive the async store from threads, failpoints aimed by caller context.",
    # 15. LangGraph checkpointers (rulvar_langgraph)
    "G1": "A superseded holder's put, put_writes, delete_thread and prune are refused and change nothing.",
    "G2": "A worker stalled in a node past its ttl cannot land a checkpoint after a successor resumed.",
    "G3": "Of two concurrent invocations of one thread, exactly one proceeds and the other gets LeaseHeldError.",
    "G4": "A worker SIGKILLed mid-node leaves its durable checkpoints, and a successor resumes them after the ttl.",
    "G5": "A write carrying a lease taken before delete_thread is refused and the thread stays deleted.",
    "G6": "Subgraph checkpoint writes carry the hold's lease and are fenced like the root graph's.",
    "G7": "A write outside a hold takes a brief lease and is refused while another worker holds the thread.",
    "G8": "After a refusal the saver never re-acquires the thread silently, even once it is free.",
    "G9": "A fresh saver reads a thread's latest checkpoint with the same few reads at any thread length.",
    "G10": "delete_for_runs and prune delete the blobs of the checkpoints they drop, not only pointers.",
    "G11": "A LangGraph thread is an ordinary run: rulvar runs list, show, audit and delete work on it.",
    "G12": "LangGraph's own checkpointer conformance suite passes at FULL for the async saver.",
    "G13": "An unheld put that continues a checkpoint of a deleted thread is refused and the thread stays deleted.",
    # 16. Power loss
    "W1": "After a power cut at any point (unsynced writes dropped or torn by sector), the SQLite store reopens with integrity_check ok.",
    "W2": "At synchronous=FULL every write acknowledged before a power cut survives it.",
    "W3": "At synchronous=NORMAL each run's survivors are a prefix of its acknowledged writes, and what survived one cut survives the later ones.",
    "W4": "A lease taken after a power cut gets an epoch above every lease that wrote durably, and at FULL above every acknowledged lease.",
    "W5": "The file store keeps every acknowledged append and meta across a power cut: a torn last line is left out and repaired, a new run folder and a renamed meta.json are synced in their folder.",
    # 17. Disk faults
    "E1": "A write failing on a full disk or an I/O error raises the retryable StoreUnavailableError, loses nothing stored, and the same handle writes again once the disk recovers.",
    "E2": "A read-only database or folder gives a typed error at once, never a hang, and changes nothing.",
}


def clause_family(clause_id: str) -> str:
    """Return the letter family of a clause id (``"J2"`` -> ``"J"``)."""
    return clause_id.rstrip("0123456789")
