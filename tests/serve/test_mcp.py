"""`medr2 mcp` (issue 38 §3): the official MCP client launches the server over stdio, lists its
tools and calls search, ask and passage on a small index (extractive path, no model download)."""

import asyncio
import json
import sys

import pytest

pytest.importorskip("mcp", reason="the 'mcp' extra is installed by make install")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from medr2.api import Medr2  # noqa: E402

NOTES = {
    "gout.md": "# Gout\n\nAllopurinol lowers serum urate and prevents gout flares. Start it after a flare settles.\n",
    "cramps.md": "# Muscle cramps\n\nQuinine should not be used routinely for nocturnal leg cramps.\n",
}


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("mcp")
    for name, text in NOTES.items():
        (d / name).write_text(text, encoding="utf-8")
    with Medr2.open(d / "index", create=True, generator="none", scorer="none") as kb:
        kb.ingest([d / n for n in NOTES])
    return d / "index"


def structured(result):
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def session(index_dir):
    params = StdioServerParameters(command=sys.executable, args=["-m", "medr2.cli", "mcp", "--index", str(index_dir),
                                                                 "--llm", "none", "--scorer", "none"])
    async with Client(params, read_timeout_seconds=120) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        found = structured(await client.call_tool("search", {"query": "what prevents gout flares", "k": 2}))
        answer = structured(await client.call_tool("ask", {"question": "What prevents gout flares?"}))
        cited = answer["citations"][0] if answer["citations"] else found["hits"][0]["passage_id"]
        passage = structured(await client.call_tool("passage", {"passage_id": cited}))
        missing = await client.call_tool("passage", {"passage_id": "p-no-such-passage"})
    return tools, found, answer, passage, missing


def test_an_agent_client_searches_asks_and_reads_the_evidence(index_dir):
    tools, found, answer, passage, missing = asyncio.run(session(index_dir))
    assert tools == {"search", "ask", "passage"}
    assert found["hits"][0]["title"] == "Gout" and "Allopurinol" in found["hits"][0]["text"]
    assert "Allopurinol" in answer["answer"] and answer["citations"] and not answer["insufficient"]
    kept = [r for r in answer["evidence"] if r["kept"]]
    assert kept and kept[0]["passage_id"] in answer["citations"] and "level" in kept[0]
    assert passage["document"]["title"] == "Gout" and "serum urate" in passage["text"]
    assert missing.is_error and "no passage" in missing.content[0].text
