"""Shared test code (not tests): checkpoint factories, the fake Hub, the format factory, the scripted
engine, and the real pair's shared engine runs. ``tests/`` is on ``sys.path`` (pytest's rootdir
insertion), so test modules import these as ``from helpers.x import y``."""
