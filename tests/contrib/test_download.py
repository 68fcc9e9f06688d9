"""``tvm.contrib.download``: test data comes from a local cache; a missing file is an error
that names it (ember stays offline unless told otherwise)."""
from __future__ import annotations

import os

import pytest

import ember as tvm
from ember.contrib import download
from ember.contrib.download import MissingTestDataError, download_testdata

URL = "https://example.invalid/models/resnet18.onnx"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_TEST_DATA", str(tmp_path / "cache"))
    monkeypatch.delenv("EMBER_TEST_DATA_DOWNLOAD", raising=False)
    return tmp_path / "cache"


def test_cached_file_is_returned_by_path(cache):
    (cache / "onnx").mkdir(parents=True)
    (cache / "onnx" / "resnet18.onnx").write_bytes(b"model")
    path = tvm.contrib.download.download_testdata(URL, "resnet18.onnx", module="onnx")
    assert path == str(cache / "onnx" / "resnet18.onnx")
    assert open(path, "rb").read() == b"model"


def test_module_may_be_a_list_of_directories(cache):
    (cache / "data" / "imagenet").mkdir(parents=True)
    (cache / "data" / "imagenet" / "cat.png").write_bytes(b"png")
    path = download_testdata("https://x/cat.png", "cat.png", module=["data", "imagenet"])
    assert path.endswith(os.path.join("data", "imagenet", "cat.png"))


def test_default_root_is_the_relay_era_cache(monkeypatch):
    monkeypatch.delenv("EMBER_TEST_DATA", raising=False)
    assert download.cache_root() == os.path.join(os.path.expanduser("~"), ".tvm_test_data")


def test_missing_file_names_file_directory_and_url(cache):
    with pytest.raises(MissingTestDataError) as info:
        download_testdata(URL, "resnet18.onnx", module="onnx")
    msg = str(info.value)
    assert "'resnet18.onnx'" in msg and str(cache / "onnx") in msg and URL in msg
    assert "EMBER_TEST_DATA_DOWNLOAD=1" in msg
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, tvm.TVMError)


def test_download_enabled_fetches_into_the_cache(cache, tmp_path, monkeypatch):
    src = tmp_path / "served.bin"
    src.write_bytes(b"\x00\x01weights")
    monkeypatch.setenv("EMBER_TEST_DATA_DOWNLOAD", "1")
    path = download_testdata(src.as_uri(), "w.bin", module="m")
    assert open(path, "rb").read() == b"\x00\x01weights"
    assert sorted(os.listdir(cache / "m")) == ["w.bin"]  # no temporary file left behind


def test_failed_download_names_url_and_path_and_leaves_nothing(tmp_path):
    target = tmp_path / "out" / "f.bin"
    bad = (tmp_path / "absent.bin").as_uri()
    with pytest.raises(tvm.TVMError, match=r"could not fetch .*absent\.bin into .*f\.bin"):
        download.download(bad, str(target), retries=0, verbose=0)
    assert os.listdir(tmp_path / "out") == []


def test_existing_file_is_kept_unless_overwrite(tmp_path):
    src, dst = tmp_path / "new.bin", tmp_path / "old.bin"
    src.write_bytes(b"new")
    dst.write_bytes(b"old")
    download.download(src.as_uri(), str(dst), verbose=0)
    assert dst.read_bytes() == b"old"
    download.download(src.as_uri(), str(dst), overwrite=True, verbose=0)
    assert dst.read_bytes() == b"new"


@pytest.mark.parametrize("relpath, module", [
    ("../../etc/passwd", None), ("/etc/passwd", None), ("x", "../outside"), ("", None)])
def test_paths_outside_the_cache_are_refused(cache, relpath, module):
    with pytest.raises((ValueError, TypeError), match="download_testdata"):
        download_testdata(URL, relpath, module=module)


def test_bad_module_type_is_refused(cache):
    with pytest.raises(TypeError, match="module must be a str or a list/tuple of str"):
        download_testdata(URL, "f", module=3)
