"""A store call awaited through ``Uncancelled`` runs to its end whatever cancels its task.

The asyncio PostgreSQL store runs each call in its caller's task (``_uncancelled``):
a cancel must neither reach the futures the call waits on (a pool hand-over, a
statement's reply) nor let the caller resume before the call is over (Y2).
These run without a server: the call is a coroutine over plain futures.

White-box: rulvar_store_postgres._uncancelled
"""

from __future__ import annotations

import asyncio

import pytest

from rulvar_store_postgres._uncancelled import Uncancellable, Uncancelled

pytestmark = pytest.mark.clause("Y2")


def test_a_cancelled_caller_resumes_only_once_the_call_is_over() -> None:
    """Cancelled at either kind of wait, the call finishes; then CancelledError."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        foreign: asyncio.Future[str] = loop.create_future()
        own: Uncancellable[str] = Uncancellable(loop=loop)
        steps: list[str] = []

        async def call() -> str:
            steps.append(await foreign)  # a pool's future, say
            steps.append(await own)  # the call's own reply wait
            await asyncio.sleep(0)
            steps.append("returned")
            return "done"

        async def caller() -> str:
            return await Uncancelled(call())

        task = asyncio.create_task(caller())
        await asyncio.sleep(0)
        task.cancel()  # while the call waits on the foreign future
        await asyncio.sleep(0)
        assert not foreign.cancelled()
        assert not task.done()
        foreign.set_result("handed over")
        await asyncio.sleep(0)
        task.cancel()  # again, while it waits for its reply
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done(), "the caller resumed while its call still ran"
        own.set_result("reply")
        with pytest.raises(asyncio.CancelledError):
            await task
        assert steps == ["handed over", "reply", "returned"]

    asyncio.run(main())


def test_an_uncancelled_call_returns_its_value_and_raises_its_errors() -> None:
    """Without a cancel the call's result and exceptions pass through unchanged."""

    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def ok() -> int:
            own: Uncancellable[int] = Uncancellable(loop=loop)
            loop.call_soon(own.set_result, 7)
            return await own + await asyncio.sleep(0, 1)

        async def failing() -> None:
            failed: asyncio.Future[None] = loop.create_future()
            loop.call_soon(failed.set_exception, LookupError("lease held"))
            await failed

        assert await Uncancelled(ok()) == 8
        with pytest.raises(LookupError, match="lease held"):
            await Uncancelled(failing())

    asyncio.run(main())


def test_a_cancel_at_a_bare_yield_is_held_until_the_call_ends() -> None:
    """A cancel landing while the call only yields the loop (sleep(0)) waits too."""

    async def main() -> None:
        ran: list[int] = []

        async def call() -> None:
            for turn in range(5):
                await asyncio.sleep(0)
                ran.append(turn)

        async def caller() -> None:
            await Uncancelled(call())

        task = asyncio.create_task(caller())
        await asyncio.sleep(0)  # the call is in, at its first bare yield
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert ran == [0, 1, 2, 3, 4]

    asyncio.run(main())
