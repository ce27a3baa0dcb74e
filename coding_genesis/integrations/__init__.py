"""Optional integrations with orchestrators: Ray (``coding-genesis[ray]``) and
LangGraph (``coding-genesis[langgraph]``).  Import the submodule you need; each
imports its engine lazily or says which extra to install."""

__all__: list[str] = []
