"""``python -m sessionstore``: the command line (``sessionstore.cli``)."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
