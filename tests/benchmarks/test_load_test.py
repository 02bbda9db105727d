"""benchmarks/load_test.py: sessions in threads of one process stay independent of each other's run ends."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Session A's run ends while session B's is still going, in that order (events), then B runs again. Run in a
# fresh interpreter: load_test patches Streamlit for the whole process.
OVERLAP = f"""
import json, sys, threading, types
sys.path.insert(0, {str(ROOT / "benchmarks")!r})
import load_test
from streamlit.testing.v1 import AppTest

EVENTS = {{name: threading.Event() for name in ("a started", "b started", "a ended")}}
sys.modules["overlap"] = types.SimpleNamespace(events=EVENTS)  # the script runs as a new __main__
SCRIPT = '''
import streamlit as st
from streamlit import runtime
from overlap import events
if st.session_state.role == "a":
    events["a started"].set()
    events["b started"].wait(60)
else:
    events["b started"].set()
    events["a ended"].wait(60)
    st.session_state.runtime = runtime.exists()
st.selectbox("pick", ["x", "y"], key="pick", format_func=str.upper)
'''
load_test.Session.instrument()
a, b = AppTest.from_string(SCRIPT), AppTest.from_string(SCRIPT)
a.session_state.role, b.session_state.role = "a", "b"
first = threading.Thread(target=a.run)
first.start()
EVENTS["a started"].wait(60)
second = threading.Thread(target=b.run)
second.start()
first.join()
EVENTS["a ended"].set()
second.join()
try:
    b.selectbox(key="pick").set_value("y").run()
    rerun = b.selectbox(key="pick").value
except KeyError as error:
    rerun = repr(error)
print(json.dumps({{"runtime": b.session_state.runtime, "rerun": rerun}}))
"""


def test_a_run_ending_in_another_session_leaves_its_run_intact():
    """Before: A's run end restored ``config.get_option`` (``global.appTest`` off) and cleared the runtime
    while B's ran, so B's widget kept no ``format_func`` and B's next run raised ``KeyError('$$ID-…-pick')``
    (``--sessions 12``: 6 of 12 sessions once), and B saw no runtime."""
    done = subprocess.run([sys.executable, "-c", OVERLAP], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"runtime": True, "rerun": "y"}
