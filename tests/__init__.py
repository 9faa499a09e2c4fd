"""rnnir's tests, one folder per subject (the package's layout); shared helpers in tests/support/.

A package, so that test modules of the same basename in different folders import by their full dotted name
(pytest's default prepend import mode puts the repository root on sys.path) and helpers import as
``from tests.support import realmodels``.
"""
