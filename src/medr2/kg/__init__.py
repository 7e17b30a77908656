"""Quality-aware clinical knowledge graph (guideline-KG paper) and the macro-micro dual-level
graph of TCM-DiffRAG: extraction, normalisation, quality, storage, export."""
