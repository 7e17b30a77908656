"""The API's routers, one module per resource; ``create_app`` includes :data:`ROUTERS` in this
order (the page and health first, the knowledge graph last).

Example::

    >>> from medr2.serve.routes import ROUTERS
    >>> [r.routes[0].path for r in ROUTERS]
    ['/', '/ask', '/search', '/documents', '/kg/subgraph']
"""

from medr2.serve.routes import ask, documents, health, kg, search

ROUTERS = [health.router, ask.router, search.router, documents.router, kg.router]

__all__ = ["ROUTERS"]
