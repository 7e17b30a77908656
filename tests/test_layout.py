"""tests/ mirrors src/medr2/: each test folder names a package of medr2, and no two test files
share a basename (pytest's default import mode puts each folder on sys.path)."""

from collections import Counter

from conftest import ROOT

TESTS = ROOT / "tests"
PACKAGE = ROOT / "src" / "medr2"


def test_each_test_folder_mirrors_a_package():
    folders = sorted(p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__")))
    assert folders, "tests/ has no per-package folders"
    missing = [f for f in folders if not (PACKAGE / f / "__init__.py").is_file()]
    assert not missing, f"test folders without a medr2 package of that name: {missing}"


def test_only_package_wide_tests_sit_at_the_root():
    root_tests = sorted(p.name for p in TESTS.glob("test_*.py"))
    # package-wide checks, and the modules at the package root (api.py, schema.py)
    assert root_tests == ["test_api.py", "test_doctests.py", "test_layout.py", "test_schema.py"]


def test_test_basenames_are_unique():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []
