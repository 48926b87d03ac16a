"""`python -m attention.analysis.coref FILE ...`: the command line (cli.py), which the library never imports."""

from .cli import main

raise SystemExit(main())
