"""``brief_put`` (L16): one blob put under a brief lease, as one fixed operation.

What ``in_brief_lease`` does for an unheld LangGraph ``put``, without running
work through the transaction's views: acquire's check, the prior-ref search,
the epoch bump where a lease row is replaced, the put and a starting run's
meta, in one ``BEGIN IMMEDIATE`` transaction. A lease row taken and deleted
in the same transaction is never seen by anyone, so none is written: the row
the brief lease replaces (an expired lease, or a provably dead holder's) is
deleted, as its release would, and the put needs no fence check, since nothing
can supersede a lease between its take and its release inside one
transaction. What a reader can observe
is what acquire, the put and release leave, the epoch aside: with no lease row
to replace, none is live and none can become live without an acquire (which
bumps), so the put spends no epoch (L16): one page less to write.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from rulvar_store.backend import BriefPutArgs
from rulvar_store_sqlite import _sql as sql
from rulvar_store_sqlite._transaction import Operation

__all__ = ["brief_put_op"]

CheckFree = Callable[[], bool]
"""Acquire's check, taking dead holders over: raises ``LeaseHeldError`` while a
live lease holds the run; else whether a lease row is there to replace."""


def brief_put_op(
    put: BriefPutArgs,
    check_free: CheckFree,
    meta_replaces: bool,
    need_prior: bool,
) -> Operation[bool]:
    """The operation of ``SqliteStore.brief_put``; its result says whether it wrote.

    With ``need_prior`` and no prior ref it writes nothing and moves no epoch
    (``False``): an unheld put that continues a deleted thread (G13).
    """
    replaced = False

    def check() -> None:
        nonlocal replaced
        replaced = check_free()

    def run(cursor: apsw.Cursor) -> bool:
        prior = _prior_ref(cursor, put)
        if need_prior and not prior:
            return False
        if replaced:
            # The row's lease (expired, or a dead holder's) is fenced out by the
            # bump, which reads its epoch: before the row goes. With no row
            # there is no lease to fence out (none is live, and only acquire,
            # which bumps, makes one), so the put spends no epoch.
            cursor.execute(sql.BUMP_EPOCH, (put.run_id,)).fetchall()
            cursor.execute(sql.DELETE_LEASE_ANY, (put.run_id,))
        cursor.execute(sql.UPSERT_BLOB, (put.ref, put.run_id, put.data))
        if not prior and put.meta_text is not None:
            statement = sql.UPSERT_META if meta_replaces else sql.INSERT_META_IF_ABSENT
            cursor.execute(statement, (put.run_id, put.meta_text))
        return True

    return Operation("brief_put", check, run)


def _prior_ref(cursor: apsw.Cursor, put: BriefPutArgs) -> bool:
    """Whether a stored ref in ``[under, bound)`` has a rest that ``tail`` matches.

    The range's least ref first: one index probe, and for a LangGraph thread
    almost always a checkpoint. The rest of the range is read only when it is
    not (the least ref is one of the first checkpoint's task writes).
    """
    start = len(put.under)
    rows = cursor.execute(sql.FIRST_BLOB_REF, (put.under, put.bound)).fetchall()
    if not rows:
        return False
    first = str(rows[0][0])
    if put.tail.search(first[start:]) is not None:
        return True
    return any(
        put.tail.search(str(ref)[start:]) is not None
        for (ref,) in cursor.execute(sql.BLOB_REFS_AFTER, (first, put.bound))
    )
