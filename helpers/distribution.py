"""Old name of :mod:`helpers.meshes`, kept only until ``helpers.notebook`` imports from there.

Lesson 08 no longer uses this module: a helper called ``distribution`` sat next to
``keras.distribution``, the API the lesson teaches.  Delete this file once
``helpers/notebook.py`` says ``from .meshes import choose_jax_platform``.
"""

from .meshes import choose_jax_platform  # noqa: F401
