"""``python -m medr2.cli``: the ``medr2`` command."""

from medr2.cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
