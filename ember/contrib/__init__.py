"""ember.contrib: the compiler driver (``cc``) and small utilities (``utils``).

Submodules are imported on use (``from ember.contrib import cc``) so that importing the
runtime never loads them.
"""
