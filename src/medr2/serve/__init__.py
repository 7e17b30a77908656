"""medr2 as a service: the HTTP API (FastAPI) and the web page (``medr2 serve``).

Needs the ``serve`` extra (``pip install 'medr2[serve]'``): importing this package without it
raises :class:`medr2.util.extras.MissingExtra` (an ImportError) naming it."""

from medr2.util.extras import require

for _module in ("fastapi", "python_multipart"):
    require(_module, "serve", "medr2 serve")
del _module
