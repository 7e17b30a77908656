"""``medr2 serve``: the HTTP API and the web page over an index."""

from __future__ import annotations

import click

from medr2.cli.common import EXIT_USAGE, config_opt, fail, index_opt, load_config, model_errors


@click.command()
@index_opt
@config_opt
@click.option("--host", help="Address to listen on (default serve.host, 127.0.0.1).")
@click.option("--port", type=int, help="Port (default serve.port, 8000).")
@click.option("--llm", "llm_spec", help="Generator (local, none, a .gguf, http(s)://HOST/v1; default llm.generator).")
@click.option("--scorer", help="Proxy LM for usefulness (default llm.scorer).")
def serve(index_dir, config_path, host, port, llm_spec, scorer):
    """Run the HTTP API and the web page over an index (token for writes: $MEDR2_API_TOKEN)."""
    import logging

    import uvicorn

    from medr2.llm.base import LLMError
    from medr2.serve.app import create_app

    config = load_config(config_path)
    try:
        app = create_app(index_dir, config, generator=llm_spec,
                         scorer=scorer)
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
