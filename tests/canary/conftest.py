"""Fixtures shared with the setup/evaluation tests: the evaluator venv's interpreter and the official tasks."""

from tests.setup_eval.conftest import evaluator_python, official_tasks  # noqa: F401 - fixtures, used by name
