"""What the command modules share: exit codes, the error exit, config and index loading, the
errors that mean a model or the index cannot be used, the common options, and the pipeline
choice (the names of :data:`medr2.pipelines.PIPELINES`, read only when click needs them so that
``medr2 --help`` does not load the pipelines)."""

from __future__ import annotations

import sys
from typing import NoReturn, Optional

import click

from medr2.config import Config, ConfigError

EXIT_FAIL, EXIT_USAGE, EXIT_PARTIAL = 1, 2, 3


def model_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean a model, the index or a setting cannot be used: a message, no traceback."""
    import sqlite3

    from medr2.store.layout import BackendError
    from medr2.index.dense import EncoderError
    from medr2.index.splade import SpladeError
    from medr2.search.cross_encoder import CrossEncoderError
    from medr2.util.extras import errors_of

    return (EncoderError, SpladeError, CrossEncoderError, BackendError, sqlite3.Error, *errors_of("psycopg", "Error"))


def fail(msg: str, code: int = EXIT_FAIL) -> NoReturn:
    """``error: MSG`` on stderr and exit with ``code``."""
    click.echo(f"error: {msg}", err=True)
    sys.exit(code)


class MainGroup(click.Group):
    """The ``medr2`` group: a command that needs an extra that is not installed (a
    :class:`medr2.util.extras.MissingExtra` its own handlers let through) ends with ``error:``
    and the extra to install, exit code 1, no traceback."""

    def invoke(self, ctx: click.Context):
        from medr2.util.extras import MissingExtra

        try:
            return super().invoke(ctx)
        except MissingExtra as e:
            fail(str(e))


def load_config(path: Optional[str]) -> Optional[Config]:
    """The config file at ``path`` (None without one); a bad file is a usage error."""
    try:
        return Config.load(path) if path else None
    except ConfigError as e:
        fail(str(e), EXIT_USAGE)


def config_or_default(path: Optional[str]) -> Config:
    return load_config(path) or Config()


def open_index(index: str, config: Optional[Config], writable: bool = False, create: bool = False):
    """An index; one whose backend cannot be opened is a usage error."""
    from medr2.store.layout import BackendError
    from medr2.index.index import Index

    try:
        return Index.open(index, config, create=create, writable=writable)
    except BackendError as e:
        fail(str(e), EXIT_USAGE)


def open_graph(index_dir: str):
    """The knowledge graph of an index."""
    from medr2.store.layout import BackendError
    from medr2.kg.build import open_kg

    try:
        return open_kg(index_dir)
    except (FileNotFoundError, BackendError) as e:  # not an index; a bad backend.json
        fail(str(e), EXIT_USAGE)
    except ConnectionError as e:  # the PostgreSQL server of backend.json cannot be reached
        fail(str(e), EXIT_FAIL)


def index_llm(spec: str, idx, index_dir: str):
    """A generator from a spec, with the index's model settings and call cache."""
    from medr2.llm.factory import load_llm, open_cache

    return load_llm(spec, idx.config.llm, open_cache(idx.config.llm, index_dir))


class PipelineChoice(click.Choice):
    """The names of :data:`medr2.pipelines.PIPELINES`, in registry order, read on first use
    (``medr2 --help`` and the commands that run no pipeline do not load them)."""

    def __init__(self) -> None:
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:
        from medr2.pipelines import PIPELINES

        return tuple(PIPELINES)


index_opt = click.option("--index", "index_dir", required=True, type=click.Path(file_okay=False),
                         help="Index directory.")
config_opt = click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True),
                          help="TOML config file (see medr2.config).")
# medr2.pipelines.ANSWER_MODES (a test keeps the two equal)
answer_mode_opt = click.option(
    "--answer-mode", type=click.Choice(["generate", "loglik", "loglik-cal"]), default="generate", show_default=True,
    help="loglik: pick the option with the highest log-likelihood (prefill only, no generation); loglik-cal: the "
         "same, calibrated against a content-free prompt.")
