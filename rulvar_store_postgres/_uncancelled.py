"""A store call that runs in its caller's task yet cannot be cancelled part way (Y2).

A cancelled asyncio task gets ``CancelledError`` at the await it is suspended
in. Inside a store call that could be between sending a statement and reading
its reply, or inside psycopg_pool's hand-over of a connection: the connection
would go back to the pool with a statement in flight, or not go back at all.
Running each call as a task of its own that refuses cancellation kept it whole,
but cost a task and two turns of the event loop per call (about 35 us of client
CPU on the reference machine, more than the loop's own wait for the reply).

``Uncancelled(coro)`` gives the same guarantee inside the caller's task. It
drives the call's coroutine and stands between it and the task at every
suspension:

* the waits of the call's own exchanges (``_calls``) are ``Uncancellable``
  futures: the task cannot cancel them, so a cancel is only recorded (asyncio
  marks the task) and delivered when the future is done, here, where it is
  held back. They pass straight through: no extra turn of the loop;
* any other future the call waits on (the pool's locks and queue, a retry's
  sleep, a failpoint hook's thread) is shown to the task as an
  ``Uncancellable`` that completes when it does, so that future itself is
  never cancelled; one more turn of the loop, on those rare waits only.

When the call is over (committed whole or not at all, its connection back in
the pool), a cancel received meanwhile is raised: the caller's
``CancelledError`` always means the call has ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any, Generic, TypeVar

__all__ = ["Uncancellable", "Uncancelled"]

T = TypeVar("T")


class Uncancellable(asyncio.Future[T]):
    """A future its awaiting task cannot cancel: ``cancel`` refuses."""

    def cancel(self, msg: Any | None = None) -> bool:
        return False


def _pass_on(stand_in: Uncancellable[None]) -> None:
    if not stand_in.done():
        stand_in.set_result(None)


class Uncancelled(Generic[T]):
    """Awaitable: ``await Uncancelled(coro)`` runs ``coro`` to its end in this task.

    A cancel of the task meanwhile is raised once ``coro`` has ended, in place
    of its result or error.
    """

    __slots__ = ("_coro",)

    def __init__(self, coro: Coroutine[Any, Any, T]) -> None:
        self._coro = coro

    def __await__(self) -> Generator[Any, None, T]:
        coro = self._coro
        loop = asyncio.get_running_loop()
        cancelled: asyncio.CancelledError | None = None
        thrown: BaseException | None = None
        try:
            while True:
                # Run the call to its next suspension (or its end).
                if thrown is None:
                    waited = coro.send(None)
                else:
                    waited, thrown = coro.throw(thrown), None
                if waited is not None and type(waited) is not Uncancellable:
                    # Someone else's future: the task is shown a stand-in.
                    stand_in: Uncancellable[None] = Uncancellable(loop=loop)
                    waited.add_done_callback(lambda _, s=stand_in: _pass_on(s))
                    stand_in._asyncio_future_blocking = True
                    waited = stand_in
                while True:
                    try:
                        yield waited
                        break
                    except asyncio.CancelledError as exc:
                        # Delivered once ``waited`` is done (it refused the
                        # cancel), or at a bare yield: held back until the end.
                        cancelled = exc
                        if waited is None or waited.done():
                            break
                    except BaseException as exc:  # anything else is the call's
                        thrown = exc
                        break
        except StopIteration as done:
            if cancelled is not None:
                raise cancelled from None
            result: T = done.value
            return result
        except BaseException:
            if cancelled is not None:
                raise cancelled from None
            raise
