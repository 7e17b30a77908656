"""Storage engines shared by the index and the knowledge graph (a ground layer: it imports
neither).

* :mod:`medr2.store.sqlbase`: portable SQL text, the ``meta`` table and schema migrations;
* :mod:`medr2.store.sqlite`: the embedded engine (a SQLite file);
* :mod:`medr2.store.postgres`: the server engine (a PostgreSQL namespace);
* :mod:`medr2.store.uri`: connection URIs (what is written, what is shown);
* :mod:`medr2.store.layout`: an index directory's files, its ``backend.json`` and ``is_index_dir``.

The index store (:mod:`medr2.index.store`) and the graph store (:mod:`medr2.kg.store`) each put
their tables and methods on these engines.
"""
