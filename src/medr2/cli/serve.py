"""``medr2 serve``: the HTTP API and the web page over an index."""

from __future__ import annotations

import click

from medr2.cli.common import EXIT_USAGE, config_opt, fail, index_opt, load_config, model_errors


def _host_patterns(ctx, param, value: tuple[str, ...]) -> tuple[str, ...]:
    """Refuse ``--trusted-host`` values that are not a name, ``*.domain`` or ``*``."""
    from medr2.config.serve import bad_host_patterns

    bad = bad_host_patterns(list(value))
    if bad:
        raise click.BadParameter(f"{', '.join(map(repr, bad))}: give a host name, '*.domain' or '*'")
    return value


@click.command()
@index_opt
@config_opt
@click.option("--host", help="Address to listen on (default serve.host, 127.0.0.1).")
@click.option("--port", type=int, help="Port (default serve.port, 8000).")
@click.option("--trusted-host", "trusted_hosts", multiple=True, metavar="NAME", callback=_host_patterns,
              help="Host header name to accept, repeatable ('*.example.org', '*' for any); replaces "
                   "serve.trusted_hosts (default localhost, 127.0.0.1, ::1). The --host address is "
                   "always accepted unless it is 0.0.0.0 or ::; other Host headers get 400.")
@click.option("--llm", "llm_spec", help="Generator (local, none, a .gguf, http(s)://HOST/v1; default llm.generator).")
@click.option("--scorer", help="Proxy LM for usefulness (default llm.scorer).")
def serve(index_dir, config_path, host, port, trusted_hosts, llm_spec, scorer):
    """Run the HTTP API and the web page over an index (token for writes: $MEDR2_API_TOKEN).

    Needs the 'serve' extra: pip install 'medr2[serve]'."""
    import logging

    from medr2.llm.base import LLMError
    from medr2.util.extras import require

    uvicorn = require("uvicorn", "serve", "medr2 serve")  # a missing extra: an error naming it (medr2.cli)
    from medr2.serve.app import create_app

    config = load_config(config_path)
    try:
        app = create_app(index_dir, config, generator=llm_spec, scorer=scorer, host=host,
                         trusted_hosts=list(trusted_hosts) or None)
    except FileNotFoundError as e:
        fail(str(e), EXIT_USAGE)
    except LLMError as e:
        fail(f"{e}\n(use --llm none to serve the deterministic extractive path)")
    except model_errors() as e:
        fail(str(e))
    sv = app.state.config.serve
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    click.echo(f"medr2 serving {index_dir} on http://{host or sv.host}:{port or sv.port}/ "
               f"(writes {'enabled' if __import__('os').environ.get(sv.token_env) else 'disabled: set ' + sv.token_env})")
    uvicorn.run(app, host=host or sv.host, port=port or sv.port, log_level="warning")


@click.command()
@index_opt
@config_opt
@click.option("--llm", "llm_spec", help="Generator (local, none, a .gguf, http(s)://HOST/v1; default llm.generator).")
@click.option("--scorer", help="Proxy LM for usefulness (default llm.scorer).")
def mcp(index_dir, config_path, llm_spec, scorer):
    """Serve an index to agent clients over the Model Context Protocol (stdio): tools search, ask
    and passage.

    Needs the 'mcp' extra: pip install 'medr2[mcp]'. Models load on the first call."""
    from medr2.api import Medr2
    from medr2.serve.mcp import build_server

    try:
        kb = Medr2(index_dir, load_config(config_path), generator=llm_spec, scorer=scorer)
    except FileNotFoundError as e:
        fail(str(e), EXIT_USAGE)
    try:
        build_server(kb).run("stdio")  # stdout carries the protocol: nothing else may print there
    finally:
        kb.close()
