"""Settings: flags > environment > defaults, and a bad setting is one line on stderr."""

from __future__ import annotations

import subprocess
import sys

import pytest

from wontopos_mcp.config import DEFAULT_MODEL, ConfigError, Settings


def test_defaults_apply_when_nothing_is_set(tmp_path):
    settings = Settings.load({}, environ={})
    assert settings.transport == "stdio"
    assert (settings.host, settings.port) == ("127.0.0.1", 8765)
    assert settings.speaker_limit == 50
    assert settings.embed_model == DEFAULT_MODEL
    assert settings.max_body_bytes == 4 * 1024 * 1024
    assert (settings.header_timeout_ms, settings.body_timeout_ms) == (10_000, 30_000)
    assert settings.body_budget_bytes == 64 * 1024 * 1024
    assert settings.db
    assert "wontopos-mcp" in settings.db


def test_environment_overrides_defaults_and_flags_override_the_environment():
    env = {"WONTOPOS_SPEAKER_LIMIT": "7", "WONTOPOS_DB": "/tmp/from-env", "WONTOPOS_PORT": "9000"}
    settings = Settings.load({"db": "/tmp/from-flag", "port": None}, environ=env)
    assert settings.db == "/tmp/from-flag"
    assert settings.speaker_limit == 7
    assert settings.port == 9000


def test_the_api_key_comes_from_the_environment_only():
    assert Settings.load({}, environ={"WONTOPOS_API_KEY": "k1"}).api_key == "k1"
    assert Settings.load({}, environ={"WONTOPOS_API_KEY": ""}).api_key == ""  # set, and empty: refused by a server
    assert Settings.load({}, environ={}).api_key is None
    with pytest.raises(ConfigError):
        Settings.load({"api_key": "k2"}, environ={})
    assert "k1" not in repr(Settings.load({}, environ={"WONTOPOS_API_KEY": "k1"}))


@pytest.mark.parametrize(
    ("overrides", "env"),
    [
        ({"speaker_limit": "lots"}, {}),
        ({}, {"WONTOPOS_SPEAKER_LIMIT": "0"}),
        ({"transport": "carrier-pigeon"}, {}),
        ({}, {"WONTOPOS_PORT": "70000"}),
        ({"log_level": "loud"}, {}),
        ({}, {"WONTOPOS_STORAGE_OPTIONS": "{allow_http: true}"}),
        ({}, {"WONTOPOS_STORAGE_OPTIONS": '["allow_http"]'}),
        ({}, {"WONTOPOS_STORAGE_OPTIONS": '{"endpoint": {"url": "http://x"}}'}),
        ({}, {"WONTOPOS_STORAGE_OPTIONS": '{"timeout": null}'}),
        ({}, {"WONTOPOS_HEADER_TIMEOUT_MS": "50"}),
        ({}, {"WONTOPOS_HEADER_TIMEOUT_MS": "ten"}),
        ({}, {"WONTOPOS_BODY_TIMEOUT_MS": "50"}),
        ({}, {"WONTOPOS_BODY_BUDGET_BYTES": "100"}),
    ],
)
def test_bad_settings_are_refused(overrides, env):
    with pytest.raises(ConfigError):
        Settings.load(overrides, environ=env)


# Real processes: a refusal at start-up is judged by what the process shows, its exit code
# and its whole stderr (one line, no traceback), before any logging or server exists.
@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--speaker-limit", "many"], {}),
        (["--transport", "smoke"], {}),
        ([], {"WONTOPOS_PORT": "-1"}),
        ([], {"WONTOPOS_STORAGE_OPTIONS": "not json"}),
        # A non-loopback bind without a key: tests/http/test_http.py (its twin, with more checks).
        (["--no-such-flag"], {}),
    ],
)
def test_a_bad_setting_stops_the_server_with_one_line_and_no_traceback(tmp_path, args, env):
    full_env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env}
    proc = subprocess.run(
        [sys.executable, "-m", "wontopos_mcp", "--db", str(tmp_path / "db"), *args],
        capture_output=True, text=True, env=full_env, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("wontopos-mcp: "), proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_opening_a_database_built_with_another_model_stops_naming_both(tmp_path):
    from wontopos_mcp.storage.adapter import META_FILE

    db = tmp_path / "db"
    db.mkdir()
    (db / META_FILE).write_text('{"model": "some-other-model", "dim": 768}')
    proc = subprocess.run(
        [sys.executable, "-m", "wontopos_mcp", "--db", str(db)],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "some-other-model" in lines[0]
    assert DEFAULT_MODEL in lines[0]


def test_storage_options_are_a_json_object_of_strings_for_lancedb():
    env = {"WONTOPOS_STORAGE_OPTIONS": '{"allow_http": true, "region": "eu-west-1", "timeout": 30}'}
    settings = Settings.load({}, environ=env)
    assert settings.storage_options_dict == {"allow_http": "true", "region": "eu-west-1", "timeout": "30"}
    assert Settings.load({}, environ={}).storage_options_dict == {}
    assert hash(settings) == hash(Settings.load({}, environ=env))  # settings stay a value


def test_a_file_uri_names_its_absolute_path(tmp_path):
    assert Settings.load({"db": f"file://{tmp_path}/my%20db"}, environ={}).db == f"{tmp_path}/my db"
    assert Settings.load({"db": "s3://bucket/db"}, environ={}).db == "s3://bucket/db"


def test_a_variable_is_not_read_when_a_flag_gives_its_setting():
    env = {"WONTOPOS_PORT": "abc", "WONTOPOS_SPEAKER_LIMIT": "many", "WONTOPOS_DB": "memory://"}
    settings = Settings.load({"port": "18982", "speaker_limit": "3", "db": "/tmp/from-flag"}, environ=env)
    assert (settings.port, settings.speaker_limit, settings.db) == (18982, 3, "/tmp/from-flag")
    with pytest.raises(ConfigError, match="WONTOPOS_PORT must be an integer, not 'abc'"):
        Settings.load({"port": None}, environ={"WONTOPOS_PORT": "abc"})  # no flag: the variable decides


@pytest.mark.slow
def test_a_bad_variable_a_flag_overrides_does_not_stop_the_cli(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "wontopos_mcp", "--port", "18982", "--db", str(tmp_path / "db"), "stores", "list"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "WONTOPOS_PORT": "abc"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\t")[0] == "default"
    assert proc.stderr == ""


@pytest.mark.parametrize("db", ["memory://", "MEMORY://x", "shared-memory://y"])
def test_an_in_memory_database_is_a_bad_setting(db):
    with pytest.raises(ConfigError, match="is an in-memory database: every memory would be lost"):
        Settings.load({"db": db}, environ={})


def test_a_database_path_that_is_not_utf8_is_a_bad_setting_naming_its_bytes():
    with pytest.raises(ConfigError, match=r"--db /x/db\\xffx is not valid UTF-8"):
        Settings.load({"db": "/x/db\udcffx"}, environ={})  # how Python keeps the byte 0xff of argv
    with pytest.raises(ConfigError, match=r"WONTOPOS_DB /x/\\ud800 is not valid UTF-8"):
        Settings.load({}, environ={"WONTOPOS_DB": "/x/\ud800"})
