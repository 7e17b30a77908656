"""medr2 as a service: the HTTP API (FastAPI) and the web page (``medr2 serve``)."""
