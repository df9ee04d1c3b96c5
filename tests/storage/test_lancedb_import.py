"""LanceDB imported without its REST client's API classes (``storage.lancedb_import``):
a database works as before, and the client's package answers as before once it is used."""

import subprocess
import sys
from pathlib import Path

from wontopos_mcp.storage.lancedb_import import defer_package_init


def test_a_database_opens_and_writes_without_the_rest_apis_and_the_package_still_answers(tmp_path: Path) -> None:
    script = f"""
import sys
from wontopos_mcp.storage.adapter import Store
store = Store({str(tmp_path / "db")!r})
store.connect()
import lancedb, pyarrow
table = lancedb.connect({str(tmp_path / "other")!r}).create_table("t", pyarrow.table({{"a": [1, 2, 3]}}))
print(table.count_rows(), "lance_namespace_urllib3_client.api" in sys.modules)
from lance_namespace_urllib3_client import ApiClient, Configuration
print(ApiClient.__name__, Configuration.__name__, "lance_namespace_urllib3_client.api" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["3", "False", "ApiClient", "Configuration", "True"]


def test_nothing_is_deferred_that_is_imported_already_or_is_no_package() -> None:
    assert defer_package_init("json") is False  # imported already
    assert defer_package_init("wontopos_mcp_no_such_package") is False
    assert "wontopos_mcp_no_such_package" not in sys.modules
