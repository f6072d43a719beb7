"""Print what ``copy.deepcopy`` of a config holding a module says (Python 2.7 to today; lesson 05)."""
import copy
import os

try:
    copy.deepcopy({"function": ("code", None, (2, os))})
    print("no error")
except TypeError as e:
    print("TypeError: %s" % e)
