"""The mcp extra is optional: without the mcp package these tests skip."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="genesis mcp needs the mcp extra (the mcp package)")
