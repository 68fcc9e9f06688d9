"""Profiling reports: typed metrics, table/csv/json output, and JSON round trips."""
from __future__ import annotations

import csv
import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
from ember.runtime.errors import ArtifactError
from ember.runtime.profiling import Count, Duration, Percent, Ratio, Report


def _report() -> Report:
    calls = [
        {"Name": "fused_add", "Duration (us)": Duration(10.0), "Percent": Percent(10.0),
         "Count": Count(1), "Device": "cpu0", "Argument Shapes": "float32[4], float32[4]"},
        {"Name": "fused_conv2d", "Duration (us)": Duration(1250.5), "Percent": Percent(80.0),
         "Count": Count(1), "Device": "cpu0", "Argument Shapes": "float32[1, 3, 8, 8]"},
        {"Name": "fused_add", "Duration (us)": Duration(5.0), "Percent": Percent(10.0),
         "Count": Count(1), "Device": "cpu0", "Argument Shapes": "float32[4], float32[4]"},
    ]
    return Report(calls, {"cpu0": {"Duration (us)": Duration(1300.0)}},
                  {"Executor": "Graph", "Threads": 2})


def test_metrics_are_typed_values():
    assert Duration(2.5) == Duration(2.5) != Percent(2.5)
    assert float(Duration(2.5)) == 2.5 and int(Count(3)) == 3 and float(Ratio(0.5)) == 0.5
    assert str(Duration(1234.5)) == "1,234.50" and str(Percent(12.345)) == "12.35"
    assert len({Duration(1.0), Duration(1.0), Count(1)}) == 2
    with pytest.raises(AttributeError, match="immutable"):
        Duration(1.0).microseconds = 2.0  # type: ignore[misc]
    assert Report([{"n": 3, "r": 0.5, "s": "x"}]).calls[0] == {"n": Count(3), "r": Ratio(0.5),
                                                               "s": "x"}


def test_table_sorts_aggregates_and_sums():
    text = _report().table()
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["Name", "Duration", "(us)"]
    assert lines[1].startswith("fused_conv2d") and "1,250.50" in lines[1]
    assert lines[2].startswith("fused_add") and "15.00" in lines[2] and " 2 " in lines[2]
    assert any(line.startswith("Sum") and "1,265.50" in line for line in lines)
    assert any(line.startswith("Total (cpu0)") and "1,300.00" in line for line in lines)
    assert "Executor: Graph" in text and "Threads: 2" in text
    # columns line up: the Duration column ends at the same place on every row
    end = lines[0].index("Duration (us)") + len("Duration (us)")
    assert all(line[end - 1] in "0123456789)" for line in lines[1:3])
    unaggregated = _report().table(aggregate=False, sort=False).splitlines()
    assert [line.split()[0] for line in unaggregated[1:4]] == ["fused_add", "fused_conv2d",
                                                               "fused_add"]
    assert str(_report()) == text


def test_csv_has_every_call():
    rows = list(csv.reader(io.StringIO(_report().csv())))
    assert rows[0] == ["Name", "Duration (us)", "Percent", "Count", "Device", "Argument Shapes"]
    assert len(rows) == 4 and rows[2][:2] == ["fused_conv2d", "1250.5"] and rows[2][3] == "1"


def test_json_layout_and_round_trip():
    report = _report()
    data = json.loads(report.json())
    assert set(data) == {"calls", "device_metrics", "configuration"}
    assert data["calls"][0]["Duration (us)"] == {"microseconds": 10.0}
    assert data["calls"][0]["Name"] == {"string": "fused_add"}
    assert data["calls"][0]["Count"] == {"count": 1}
    assert data["configuration"]["Executor"] == {"string": "Graph"}
    again = Report.from_json(report.json())
    assert again.calls == report.calls and again.device_metrics == report.device_metrics
    assert again.configuration == report.configuration and again.json() == report.json()


def test_from_json_reads_relay_era_reports():
    text = ('{"calls": [{"Name": {"string": "vm_mod_fused_add"}, "Duration (us)": '
            '{"microseconds": 3.25}, "Percent": {"percent": 50}, "Count": {"count": 2}, '
            '"Ratio": {"ratio": 0.5}}], "device_metrics": {"cpu0": {"Duration (us)": '
            '{"microseconds": 6.5}}}, "configuration": {"Executor": {"string": "VM"}}}')
    report = ember.runtime.profiling.Report.from_json(text)
    assert report.calls[0]["Duration (us)"].microseconds == 3.25
    assert report.calls[0]["Count"] == Count(2) and report.configuration["Executor"] == "VM"


@pytest.mark.parametrize("text, message", [
    ("{", "not valid JSON"),
    ('{"device_metrics": {}}', "expected an object with a 'calls' list"),
    ('{"calls": [3]}', r"calls\[0\]: expected an object, got int"),
    ('{"calls": [{"Name": "x"}]}', r"calls\[0\]\['Name'\]: expected an object with one key"),
    ('{"calls": [{"T": {"seconds": 1}}]}', r"calls\[0\]\['T'\]: unknown metric 'seconds'=1"),
    ('{"calls": [], "configuration": {"E": {"count": "x"}}}', r"configuration\['E'\]: unknown"),
    ('{"calls": [], "device_metrics": []}', "device_metrics: expected an object, got list"),
])
def test_from_json_errors(text, message):
    with pytest.raises(ArtifactError, match=message):
        Report.from_json(text)


_names = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), min_size=1, max_size=8)
_metrics = st.one_of(
    st.floats(0, 1e9, allow_nan=False).map(Duration), st.floats(0, 100).map(Percent),
    st.integers(0, 1 << 40).map(Count), st.floats(-1e6, 1e6, allow_nan=False).map(Ratio), _names)


@given(st.lists(st.dictionaries(_names, _metrics, max_size=5), max_size=5),
       st.dictionaries(_names, _metrics, max_size=3))
def test_json_round_trip_law(calls, configuration):
    report = Report(calls, {"cpu0": {"Duration (us)": Duration(1.0)}}, configuration)
    again = Report.from_json(report.json())
    assert again.calls == report.calls and again.configuration == report.configuration
    again.table(), again.csv()  # every report prints
