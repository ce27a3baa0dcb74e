"""``genesis mcp`` and ``/mcp``: the server's runs, sessions and approval inbox
as MCP tools (the ``mcp`` extra).

Private: the tools over the server's parts (``tools.py``), the MCP server
made of them (``server.py``), served on stdio (``stdio.py``) or mounted on
``genesis serve`` behind its door (``http.py``).  Nothing is imported here:
the ``mcp`` package loads only when one of them starts.
"""
