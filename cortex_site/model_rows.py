"""Model instances from hand-written statements, for the few hot paths where building and compiling
a queryset costs more than running it: the webhook's connector lookup and delivery insert
(connectors/services/deliveries.py) and recall's returned memories (memories/retrieval/sql.py).

Everything else uses the ORM. What these helpers keep from it: the model's own table and column
names (from its `_meta`, so a renamed column follows), every value read through the converters the
ORM would apply, and instances made by `Model.from_db` (loaded state, no save-time surprises).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from django.db import connections, models
from django.db.backends.base.base import BaseDatabaseWrapper

ModelT = TypeVar("ModelT", bound=models.Model)


def table_and_columns(
    model: type[models.Model], fields: Sequence[models.Field[Any, Any]], connection: BaseDatabaseWrapper, *, alias: str = ""
) -> tuple[str, str]:
    """`model`'s table and `fields`' columns, quoted (each prefixed with `alias.` when given)."""
    quote = connection.ops.quote_name
    prefix = f"{alias}." if alias else ""
    return quote(model._meta.db_table), ", ".join(f"{prefix}{quote(str(field.column))}" for field in fields)


class RowReader(Generic[ModelT]):
    """Turns the values of every concrete field of `model`, in `_meta.concrete_fields` order and as a
    cursor returns them, into an instance: each value through the backend's and the field's converters
    (as the ORM's compiler applies them), then `Model.from_db`. Finding the converters takes ~0.1 ms, so
    readers are kept per model and database alias (`row_reader`); `read` is called per row."""

    def __init__(self, model: type[ModelT], connection: BaseDatabaseWrapper) -> None:
        self.model: type[ModelT] = model
        self.fields: tuple[models.Field[Any, Any], ...] = tuple(model._meta.concrete_fields)
        self.attnames = [field.attname for field in self.fields]
        self.converters: list[tuple[int, Any, list[Callable[..., Any]]]] = []
        for position, field in enumerate(self.fields):
            column = field.get_col(model._meta.db_table)
            found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            if found:
                self.converters.append((position, column, found))

    def read(self, values: Sequence[Any], connection: BaseDatabaseWrapper) -> ModelT:
        row = list(values)
        for position, column, converters in self.converters:
            for convert in converters:
                row[position] = convert(row[position], column, connection)
        return self.model.from_db(connection.alias, self.attnames, row)


@functools.cache
def _reader(model: type[models.Model], alias: str) -> RowReader[Any]:
    return RowReader(model, connections[alias])


def row_reader(model: type[ModelT], connection: BaseDatabaseWrapper) -> RowReader[ModelT]:
    """The reader of `model`'s rows read through `connection` (kept: its converters are the alias's
    backend's and the fields', the same for every connection of that alias)."""
    reader: RowReader[ModelT] = _reader(model, connection.alias)
    return reader
