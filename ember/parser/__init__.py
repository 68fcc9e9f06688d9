"""ember.parser: the text format parser (``fromtext``, ``parse``, ``parse_expr``)."""
from __future__ import annotations

from ..ir.parser import fromtext, parse, parse_expr  # noqa: F401
from ..relay import op as _operators  # noqa: F401  (registers the ops the text names)
