"""helpers.lazy: classes with a framework base class, built on first access (the import rule)."""

import inspect
import pickle
import sys
import types

import pytest

from helpers import lazy


def test_framework_class_finds_a_class_and_refuses_anything_else():
    assert lazy.framework_class("collections.OrderedDict") is __import__("collections").OrderedDict
    with pytest.raises(ValueError, match="is not a class"):
        lazy.framework_class("os.path.join")
    with pytest.raises(AttributeError):
        lazy.framework_class("collections.NoSuchThing")


class _Body:
    """A body: its methods end up in the public class."""

    def hello(self):
        return "hello from " + type(self).__name__


@pytest.fixture
def fake_module():
    """A module ``fake_lazy_mod`` whose public class ``Thing(_Body, collections.OrderedDict)`` is lazy."""
    mod = types.ModuleType("fake_lazy_mod")
    mod._Body, mod.__file__ = _Body, __file__      # the body's source is in this file
    mod.__getattr__, mod.__dir__ = lazy.subclasses("fake_lazy_mod", {"Thing": (_Body, "collections.OrderedDict")})
    sys.modules["fake_lazy_mod"] = mod
    yield mod
    del sys.modules["fake_lazy_mod"]


def test_the_class_is_built_once_named_and_documented_as_if_defined_in_the_module(fake_module):
    assert "Thing" not in vars(fake_module) and "Thing" in dir(fake_module)   # not built yet, but listed
    cls = fake_module.Thing
    assert cls is fake_module.Thing and vars(fake_module)["Thing"] is cls        # built once, then stored
    assert cls.__name__ == cls.__qualname__ == "Thing" and cls.__module__ == "fake_lazy_mod"
    assert cls.__doc__ == _Body.__doc__ and cls.__mro__[1:3] == (_Body, __import__("collections").OrderedDict)
    thing = cls(a=1)
    assert thing.hello() == "hello from Thing" and thing["a"] == 1
    assert pickle.loads(pickle.dumps(thing)) == thing                              # pickle finds the class
    with pytest.raises(AttributeError, match="has no attribute 'Other'"):
        fake_module.Other


@pytest.mark.skipif(sys.version_info < (3, 13), reason="classes record __firstlineno__ from Python 3.13")
def test_the_source_of_the_built_class_is_the_body_on_python_3_13(fake_module):
    assert inspect.getsource(fake_module.Thing) == inspect.getsource(_Body)
