"""The one rule set for identifiers and values that every store applies before any I/O.

Every backend (memory, file, SQLite, PostgreSQL, and any plugin that wants the
same guarantees) calls these functions at the top of each public method, so a bad
argument fails the same way everywhere: ``InvalidArgumentError`` (a
``ContractError``, never retryable) naming the operation and the argument, and
nothing is persisted. Non-JSON values raise ``NotJsonError``, which is also a
``TypeError`` and a ``ValueError`` as D2 says.

What is accepted (docs/reference/data-rules.md says the same):

Run ids written (``append``, ``put_meta``'s ``runId``, ``acquire``, a blob ``put``'s
leading segment): a non-empty ``str`` of at most ``MAX_RUN_ID_LENGTH`` characters,
without ``/`` (a blob ref's run is its first segment, T3), control characters
(``U+0000``-``U+001F``, ``U+007F``-``U+009F``) or lone surrogates. Everything else
is allowed, ``%``, ``_``, ``:``, ``.``, spaces and non-ASCII letters included.

Owners (``acquire``): the same, except that ``/`` is allowed (an owner is never
part of a path or ref).

Blob refs written (``put``): ``<runId>`` or ``<runId>/<rest>`` where the run id
follows the rule above and ``rest`` is non-empty, without control characters or
lone surrogates; at most ``MAX_REF_LENGTH`` characters in all.

Reads and removals (``load``, ``get_meta``, ``delete``, ``list_refs``, blob
``get`` and ``delete``, the fields of a presented ``Lease``, ``RunFilter``
strings) take any ``str`` without NUL characters or lone surrogates. Those two
can be stored by no backend (PostgreSQL text cannot hold NUL, UTF-8 cannot hold a
lone surrogate), while ids the TypeScript reference may have written that the
write rule now refuses (``"a/b"``, ``""``, very long ones) must still load,
list and delete from a shared database.

Records (entries, metas): a ``dict`` whose keys are all ``str`` at every depth,
holding only ``dict``, ``list``, ``tuple``, ``str``, ``int``, ``float``, ``bool`` and
``None``; no NaN or Infinity, no NUL character and no lone surrogate in any
string or key, nested at most ``MAX_DEPTH`` deep, at most ``MAX_RECORD_BYTES``
bytes once serialized. Blobs: bytes-like, at most ``MAX_BLOB_BYTES``.

The file store adds its stricter safe-token rule on top (T8, T9).
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

from rulvar_store._json import dump_plain_record, dump_record
from rulvar_store._records import Lease, RunFilter
from rulvar_store.errors import InvalidArgumentError, NotJsonError

__all__ = [
    "MAX_BLOB_BYTES",
    "MAX_DEPTH",
    "MAX_OWNER_LENGTH",
    "MAX_RECORD_BYTES",
    "MAX_REF_LENGTH",
    "MAX_RUN_ID_LENGTH",
    "blob_bytes",
    "entry_text",
    "lease_or_none",
    "meta_run_id",
    "meta_text",
    "numeric_seq",
    "owner_for_write",
    "ref_for_read",
    "ref_for_write",
    "require_lease",
    "require_str",
    "run_filter",
    "run_id_for_read",
    "run_id_for_write",
    "text_for_read",
]

MAX_RUN_ID_LENGTH: Final = 255
"""Characters. At most 1 020 UTF-8 bytes: far inside every backend's key limits
(PostgreSQL's btree rows stop near 2 700 bytes)."""
MAX_OWNER_LENGTH: Final = 255
MAX_REF_LENGTH: Final = 512
"""Characters; at most 2 048 UTF-8 bytes, under PostgreSQL's btree row limit."""
MAX_RECORD_BYTES: Final = 64 * 1024 * 1024
"""Serialized UTF-8 bytes of one entry or meta record. PostgreSQL's jsonb (used by
the format's indexes) stops at 256 MiB and SQLite's default string limit at 1e9
bytes; one bound for all keeps a record portable between backends."""
MAX_BLOB_BYTES: Final = 256 * 1024 * 1024
"""Bytes of one blob; PostgreSQL's bytea and protocol messages stop at 1 GiB."""
MAX_DEPTH: Final = 256
"""Nesting of records; deeper (or a cycle) would exhaust the serializer's stack."""
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")
_SCALARS: Final = (str, int, float, bool, type(None))


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 70 else text[:60] + "...'"


def _invalid(operation: str, argument: str, problem: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{operation}: {argument} {problem}", operation, argument
    )


def require_str(value: object, operation: str, argument: str) -> str:
    """Return ``value`` if it is a str (the type half of every rule).

    Raises:
        InvalidArgumentError: it is not.
    """
    return _string(value, operation, argument)


def _string(value: object, operation: str, argument: str) -> str:
    if not isinstance(value, str):
        raise _invalid(
            operation, argument, f"must be a str, got {type(value).__name__}"
        )
    return value


def _storable(value: str, operation: str, argument: str) -> str:
    """No NUL and no lone surrogate: what no backend can keep or look up."""
    if "\x00" in value:
        raise _invalid(
            operation, argument, f"must not contain NUL characters, got {_shown(value)}"
        )
    if not value.isascii() and _SURROGATE.search(value):
        raise _invalid(
            operation,
            argument,
            f"must not contain lone surrogates (not UTF-8), got {_shown(value)}",
        )
    return value


def _token(value: object, operation: str, argument: str, max_length: int) -> str:
    """The write rule shared by run ids, owners and ref tails (slash aside)."""
    text = _storable(_string(value, operation, argument), operation, argument)
    if not text:
        raise _invalid(operation, argument, "must not be empty")
    if len(text) > max_length:
        raise _invalid(
            operation,
            argument,
            f"must be at most {max_length} characters, got {len(text)}",
        )
    if _CONTROL.search(text):
        raise _invalid(
            operation,
            argument,
            f"must not contain control characters, got {_shown(text)}",
        )
    return text


def text_for_read(value: object, operation: str, argument: str) -> str:
    """Return ``value`` if it is a str any backend can look up (no NUL, no lone surrogate).

    Raises:
        InvalidArgumentError: anything else.
    """
    return _storable(_string(value, operation, argument), operation, argument)


def run_id_for_read(value: object, operation: str, argument: str = "run_id") -> str:
    """Return a run id to read, list or delete by; see the module rules.

    Raises:
        InvalidArgumentError: not a str, or a NUL or lone surrogate in it.
    """
    return text_for_read(value, operation, argument)


def run_id_for_write(value: object, operation: str, argument: str = "run_id") -> str:
    """Return a run id a write may create state under; see the module rules.

    Raises:
        InvalidArgumentError: not a non-empty str of at most ``MAX_RUN_ID_LENGTH``
            characters free of ``/``, control characters and lone surrogates.
    """
    run_id = _token(value, operation, argument, MAX_RUN_ID_LENGTH)
    if "/" in run_id:
        raise _invalid(
            operation,
            argument,
            f"must not contain '/' (a blob ref's run is its first segment), "
            f"got {_shown(run_id)}",
        )
    return run_id


def owner_for_write(value: object, operation: str) -> str:
    """Return a lease owner for ``acquire``: the run id rule, ``/`` allowed.

    Raises:
        InvalidArgumentError: not a non-empty str of at most ``MAX_OWNER_LENGTH``
            characters free of control characters and lone surrogates.
    """
    return _token(value, operation, "owner", MAX_OWNER_LENGTH)


def ref_for_read(value: object, operation: str) -> tuple[str, str]:
    """Return ``(ref, run_id)`` for a blob ``get`` or ``delete``.

    Raises:
        InvalidArgumentError: not a str, or a NUL or lone surrogate in it.
    """
    ref = text_for_read(value, operation, "ref")
    return ref, ref.split("/", 1)[0]


def ref_for_write(value: object, operation: str) -> tuple[str, str]:
    """Return ``(ref, run_id)`` for a blob ``put``: ``<runId>`` or ``<runId>/<rest>``.

    Raises:
        InvalidArgumentError: the run segment breaks the run id rule, the rest is
            empty or has control characters or lone surrogates, or the ref is
            longer than ``MAX_REF_LENGTH``.
    """
    ref = _token(value, operation, "ref", MAX_REF_LENGTH)
    run_id, slash, rest = ref.partition("/")
    try:
        run_id_for_write(run_id, operation, "run segment")
    except InvalidArgumentError as exc:
        raise _invalid(
            operation, "ref", f"{exc.message.split(': ', 1)[1]} (ref {_shown(ref)})"
        ) from None
    if slash and not rest:
        raise _invalid(
            operation, "ref", f"must have a name after its run's '/', got {_shown(ref)}"
        )
    return ref, run_id


def _epoch(value: object, operation: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(
            operation, "lease", f"epoch must be an int, got {type(value).__name__}"
        )
    if not INT64_MIN <= value <= INT64_MAX:
        raise _invalid(operation, "lease", f"epoch {value} is outside int64")
    return value


def lease_or_none(lease: object, operation: str) -> Lease | None:
    """Return ``lease`` if it is ``None`` or a ``Lease`` with well-typed fields.

    Raises:
        InvalidArgumentError: anything else; a field of the wrong type.
    """
    if lease is None:
        return None
    return require_lease(lease, operation)


def require_lease(lease: object, operation: str) -> Lease:
    """Return ``lease`` if it is a ``Lease`` with well-typed fields (``None`` refused).

    Raises:
        InvalidArgumentError: anything else; a field of the wrong type.
    """
    if not isinstance(lease, Lease):
        raise _invalid(
            operation, "lease", f"must be a Lease, got {type(lease).__name__}"
        )
    text_for_read(lease.run_id, operation, "lease.run_id")
    text_for_read(lease.owner, operation, "lease.owner")
    _epoch(lease.epoch, operation)
    return lease


def _bad_value(value: Any, path: str) -> str | None:
    """Return what makes ``value`` not storable JSON, or ``None``; iterative walk."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return f"{where} contains a NUL character"
            if not item.isascii() and _SURROGATE.search(item):
                return f"{where} contains a lone surrogate (not UTF-8)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{where} is {item!r}, which JSON cannot represent"
        elif isinstance(item, _SCALARS):
            continue
        elif depth >= MAX_DEPTH:
            return f"{where} is nested deeper than {MAX_DEPTH} levels (or is a cycle)"
        elif isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    return (
                        f"{where} has a {type(key).__name__} key {_shown(key)}; JSON "
                        "object keys are strings"
                    )
                if "\x00" in key or (not key.isascii() and _SURROGATE.search(key)):
                    return (
                        f"{where} has a key {_shown(key)} with a NUL or lone surrogate"
                    )
                stack.append((child, f"{where}[{key!r}]", depth + 1))
        elif isinstance(item, list | tuple):
            for index, child in enumerate(item):
                stack.append((child, f"{where}[{index}]", depth + 1))
        else:
            return f"{where} is a {type(item).__name__}, which is not JSON"
    return None


# What ``_plain_json`` found in a record.
_NOT_PLAIN: Final = 0  # something ``_bad_value`` must judge
_PLAIN: Final = 1  # storable, but a float or a subclass of a JSON type in it
_PLAIN_EXACT: Final = 2  # exact JSON types and no float: ``dump_plain_record``


def _plain_json(value: Any) -> int:
    """Fast check that ``value`` holds only what ``_bad_value`` accepts.

    No paths are built: on the rare failure ``_bad_value`` walks again to say
    where. NaN, Infinity and lone surrogates are left to the serializer and the
    UTF-8 encoding, which refuse them anyway. Returns ``_NOT_PLAIN``,
    ``_PLAIN`` or ``_PLAIN_EXACT``.
    """
    exact = True
    stack: list[tuple[Any, int]] = [(value, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth = pop()
        kind = type(item)
        if kind is str:
            if "\x00" in item:
                return _NOT_PLAIN
        elif kind is dict:
            if depth >= MAX_DEPTH:
                return _NOT_PLAIN
            for key, child in item.items():
                if type(key) is not str or "\x00" in key:
                    return _NOT_PLAIN
                push((child, depth + 1))
        elif kind is list or kind is tuple:
            if depth >= MAX_DEPTH:
                return _NOT_PLAIN
            for child in item:
                push((child, depth + 1))
        elif kind is int or kind is bool or item is None:
            continue
        elif kind is float:
            exact = False
        elif _bad_value(item, "") is not None:  # subclasses, foreign types
            return _NOT_PLAIN
        else:
            exact = False
    return _PLAIN_EXACT if exact else _PLAIN


def _record_text(record: dict[str, Any], operation: str, argument: str) -> str:
    plain = _plain_json(record)
    if plain == _NOT_PLAIN:
        problem = _bad_value(record, argument)
        if problem is not None:
            raise NotJsonError(f"{operation}: {problem}", operation, argument)
    try:
        text = (
            dump_plain_record(record) if plain == _PLAIN_EXACT else dump_record(record)
        )
        # Lone surrogates survive json.dumps(ensure_ascii=False) but not UTF-8.
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
    except (TypeError, ValueError, RecursionError) as exc:
        problem = _bad_value(record, argument) or f"{argument} is not JSON: {exc}"
        raise NotJsonError(f"{operation}: {problem}", operation, argument) from exc
    if size > MAX_RECORD_BYTES:
        raise NotJsonError(
            f"{operation}: {argument} is {size} bytes as JSON, above the "
            f"{MAX_RECORD_BYTES}-byte bound",
            operation,
            argument,
        )
    return text


def entry_text(entry: object, operation: str = "append") -> str:
    """Return the entry's JSON text (D2: serialized before anything is durable).

    Raises:
        InvalidArgumentError: ``entry`` is not a dict.
        NotJsonError: it holds a value the module rules refuse.
    """
    if not isinstance(entry, dict):
        raise _invalid(
            operation, "entry", f"must be a dict, got {type(entry).__name__}"
        )
    return _record_text(entry, operation, "entry")


def meta_text(meta: object, operation: str = "put_meta") -> tuple[str, str]:
    """Return ``(run_id, text)`` of a meta record; ``runId`` follows the write rule.

    Raises:
        InvalidArgumentError: not a dict, or its ``runId`` breaks the run id rule.
        NotJsonError: it holds a value the module rules refuse.
    """
    if not isinstance(meta, dict):
        raise _invalid(operation, "meta", f"must be a dict, got {type(meta).__name__}")
    if "runId" not in meta:
        raise _invalid(operation, "meta", "must have a 'runId'")
    run_id = run_id_for_write(meta["runId"], operation, "meta['runId']")
    return run_id, _record_text(meta, operation, "meta")


def meta_run_id(meta: object, operation: str = "put_meta") -> str:
    """Return ``meta["runId"]`` under the run id write rule, without serializing meta.

    For stores that keep the meta object itself (the memory store's self-test
    twins); stores that write text use ``meta_text``.

    Raises:
        InvalidArgumentError: meta is not a dict or its ``runId`` is not a valid id.
    """
    if not isinstance(meta, dict):
        raise _invalid(operation, "meta", f"must be a dict, got {type(meta).__name__}")
    return run_id_for_write(meta.get("runId"), operation, "meta['runId']")


def numeric_seq(entry: dict[str, Any], operation: str = "append") -> None:
    """Refuse a present, non-null ``seq`` that is not a JSON number (D5, PostgreSQL).

    For backends whose format casts ``seq`` to a number in an index: ``true``,
    strings (numeric-looking or not), arrays and objects cannot be stored there.

    Raises:
        InvalidArgumentError: such a seq.
    """
    seq = entry.get("seq")
    if seq is None or (isinstance(seq, int | float) and not isinstance(seq, bool)):
        return
    raise _invalid(
        operation,
        "entry",
        f"has seq {_shown(seq)}, which is not a JSON number; this store's format "
        "casts seq to a number, so only numbers (or no seq) can be stored",
    )


def blob_bytes(blob: object, operation: str) -> bytes:
    """Return an immutable copy of bytes-like input (D3), within ``MAX_BLOB_BYTES``.

    Raises:
        InvalidArgumentError: not ``bytes``, ``bytearray`` or ``memoryview``, or
            too large; the size is checked before anything is copied.
    """
    if not isinstance(blob, bytes | bytearray | memoryview):
        raise _invalid(
            operation,
            "blob",
            f"must be bytes, bytearray or memoryview, got {type(blob).__name__}",
        )
    size = blob.nbytes if isinstance(blob, memoryview) else len(blob)
    if size > MAX_BLOB_BYTES:
        raise _invalid(
            operation, "blob", f"is {size} bytes, above the {MAX_BLOB_BYTES}-byte bound"
        )
    return bytes(blob)


def run_filter(value: object, operation: str = "list_runs") -> RunFilter | None:
    """Return ``value`` if it is ``None`` or a ``RunFilter`` whose fields are well typed.

    Raises:
        InvalidArgumentError: not a RunFilter, or a field of the wrong type (a
            bare str as ``statuses`` would match per character), or a string
            with a NUL or lone surrogate.
    """
    if value is None:
        return None
    if not isinstance(value, RunFilter):
        raise _invalid(
            operation,
            "run_filter",
            f"must be a RunFilter or None, got {type(value).__name__}",
        )
    for name in ("status", "name"):
        field = getattr(value, name)
        if field is not None:
            if not isinstance(field, str):
                raise _invalid(operation, f"RunFilter.{name}", "must be a str or None")
            text_for_read(field, operation, f"RunFilter.{name}")
    for name in ("statuses", "tags"):
        values = getattr(value, name)
        if values is None:
            continue
        if isinstance(values, str | bytes) or not all(
            isinstance(item, str) for item in values
        ):
            raise _invalid(
                operation, f"RunFilter.{name}", "must be a sequence of str or None"
            )
        for item in values:
            text_for_read(item, operation, f"RunFilter.{name}")
    return value
