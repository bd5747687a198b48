"""Installed packages found without importing them (the one owner: m3agent.packages)."""

from __future__ import annotations

import sys
from pathlib import Path

import m3agent
from m3agent.packages import package_dir


def test_the_folder_of_an_installed_package() -> None:
    assert package_dir("m3agent") == Path(m3agent.__file__).parent
    assert (package_dir("json") or Path()).joinpath("decoder.py").is_file()


def test_a_missing_package_or_a_single_file_module_is_none() -> None:
    assert package_dir("no_such_package_m3agent") is None
    assert package_dir("no_such_package_m3agent.sub") is None  # the parent is missing: no ImportError
    assert package_dir("shutil") is None  # a module, not a package folder


def test_finding_a_folder_does_not_import_the_package() -> None:
    sys.modules.pop("xml.dom.minidom", None)
    assert package_dir("xml.dom") is not None
    assert "xml.dom.minidom" not in sys.modules
