"""`python -m autograder ...`: see autograder/cli.py."""
from .cli import main

raise SystemExit(main())
