"""Which estimate is collecting, if any: the one global the hooks test (None = zero cost)."""
from __future__ import annotations

active = None   # the innermost Estimate being collected, else None
