"""``genesis serve``: runs over HTTP and Server-Sent Events (the ``serve`` extra).

Private: the server's parts, one module each (see docs/serve.md and
docs/architecture.md).  Nothing is imported here: FastAPI and uvicorn load
only when the server starts.
"""
