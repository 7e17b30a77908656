"""medr2 as a Model Context Protocol server (``medr2 mcp``), so agent clients can search an index,
ask it a question and read the evidence behind an answer. It speaks MCP over stdio through the
official Python SDK (``mcp``, the ``mcp`` extra) and calls the same API as the CLI and the HTTP
service (:class:`medr2.api.Medr2`).

Tools:

* ``search(query, k)``: hybrid search, fused and coarse-reranked; the hits with their passage ids;
* ``ask(question, options, pipeline)``: the cited answer, its citations and the evidence table
  (relevance, evidence level, F, whether each passage reached the context and why);
* ``passage(passage_id)``: one passage in full with its document (title, source type, year,
  origin), to read what an answer cites.

Example (an agent client configuration)::

    {"mcpServers": {"medr2": {"command": "medr2", "args": ["mcp", "--index", "/data/idx", "--llm", "none"]}}}
"""

from __future__ import annotations

from typing import Any, Optional

from medr2.api import Medr2

# the evidence table of an answer, as an agent reads it (full rows: `medr2 ask --json`)
_ROW_FIELDS = ("n", "passage_id", "title", "source_type", "relevance", "level", "design", "F", "kept", "reason")


def search_tool(kb: Medr2, query: str, k: int = 10) -> dict[str, Any]:
    """The ``search`` tool's reply: the query and its hits."""
    res = kb.search(query, k=max(1, min(int(k), 50)))
    return {"query": query, "hits": [{"passage_id": h.passage_id, "title": h.title,
                                      "source_type": h.source_type.value, "score": round(float(h.score), 4),
                                      "heading_path": list(h.heading_path), "text": h.text} for h in res.hits]}


def ask_tool(kb: Medr2, question: str, options: Optional[dict[str, str]] = None,
             pipeline: str = "medr2") -> dict[str, Any]:
    """The ``ask`` tool's reply: answer, rationale, citations, notes and the evidence table."""
    res = kb.ask(question, options or {}, pipeline=pipeline)
    rows = [{f: v for f, v in r.model_dump(mode="json").items() if f in _ROW_FIELDS} for r in res.evidence]
    return {"question": question, "answer": res.answer, "rationale": res.rationale, "citations": res.citations,
            "insufficient": res.insufficient, "method": res.method, "evidence_used": res.evidence_used,
            "notes": list(res.notes), "recommendations": [r.model_dump(mode="json") for r in res.recommendations],
            "evidence": rows}


def passage_tool(kb: Medr2, passage_id: str) -> dict[str, Any]:
    """The ``passage`` tool's reply: the passage and its document; an unknown id is an error."""
    p = kb.passage(passage_id)
    if p is None:
        raise ValueError(f"no passage {passage_id!r} in this index: give a passage id from search or ask")
    return p


def build_server(kb: Medr2):
    """The MCP server over ``kb`` (needs the ``mcp`` extra)."""
    from medr2.util.extras import require

    require("mcp", "mcp", "medr2 mcp")
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from medr2.llm.base import LLMError
    from medr2.search.hybrid import QueryError

    def told(fn, *args):
        """A refusal the caller can act on (bad query, unknown passage, model failure) reaches the
        agent with its message; anything else stays a crash logged by the server."""
        try:
            return fn(kb, *args)
        except (ValueError, QueryError, LLMError, FileNotFoundError) as e:
            raise ToolError(str(e)) from e

    server = MCPServer("medr2", instructions=(
        "Evidence-based medical question answering over one index. search finds passages; ask answers "
        "with citations to passage ids and an appraised evidence table; passage reads a cited passage in full. "
        "Answers are only as good as the indexed sources; they are not clinical advice."))

    @server.tool(description="Hybrid search of the index (dense + BM25, reranked): up to k passages "
                             "with their ids, titles, source types and text.")
    def search(query: str, k: int = 10) -> dict[str, Any]:
        return told(search_tool, query, k)

    @server.tool(description="Answer a medical question from the index with the Med-R2 pipeline: the answer, "
                             "its citations (passage ids), notes, and the evidence table. options: letter -> "
                             "text for a multiple-choice question.")
    def ask(question: str, options: Optional[dict[str, str]] = None, pipeline: str = "medr2") -> dict[str, Any]:
        return told(ask_tool, question, options, pipeline)

    @server.tool(description="One passage in full with its document (title, source type, year, origin): "
                             "read what an answer cites.")
    def passage(passage_id: str) -> dict[str, Any]:
        return told(passage_tool, passage_id)

    return server
