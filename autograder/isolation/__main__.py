"""python -m autograder.isolation build: the container tier's tree for this interpreter
(the Gradescope bundle's setup.sh runs it once, at image build time), and whether the
tier can run here."""
import sys

from .container import main

sys.exit(main(sys.argv[1:]))
