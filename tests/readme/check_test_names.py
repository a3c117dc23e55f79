import sys; print("docs-tests: (todo)")
