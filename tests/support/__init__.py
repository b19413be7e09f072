"""Helpers shared by test modules, which import them from here and never from one another. Nothing
here is collected (pytest collects test_*.py only); shared fixtures live in tests/conftest.py."""
