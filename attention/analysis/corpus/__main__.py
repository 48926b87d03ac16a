"""`python -m attention.analysis.corpus FILE --out DIR ...`: the command line (cli.py), which the library never
imports."""

from .cli import main

raise SystemExit(main())
