"""What runs first on a node for every script call: the stubs that find the unit, check it, and run
a script of it. Pure: text and names only (no import of the launcher's libraries, so that
`scripts/gen_catalog.py` can build the unit inside any vLLM venv).

`python3 -S -c RUN_STUB UNIT SCRIPT ARGS...` reads ~/.spark-launch/agent/UNIT.pyz, runs
nothing of it unless its sha256 is UNIT (else it exits with UNIT_MISSING, saying so on
stderr: the agent then sends the unit and runs the call again), puts it first on the import
path and runs the module SCRIPT of its package as __main__ (runpy), with ARGS. No bytecode is
kept: zipimport compiles the modules a call loads, a few milliseconds (bench/unit_calls.py).
CARRY_STUB takes the unit from stdin's first line instead (base64), for a container (which
cannot see the node's home), for keeping the unit (`install`), and for a node that cannot
keep it. The stubs are short enough that `ps` shows the script's name after them on a wide
terminal (`ps -eo args` shows it whole).
"""

from __future__ import annotations

UNIT_HOME = ".spark-launch/agent"  # under the remote user's home: the unit, as <sha256>.pyz
UNIT_PACKAGE = "spark_node"  # the unit's one top-level package: node/scripts as it is on a node
UNIT_MISSING = 87  # the stub's exit status when the unit is not kept, or is not the one named
UNIT_MISSING_SAYS = "spark-launch: no unit"  # and the start of what it says on stderr
# Both stubs first drop the current directory ('' with -c) from the import path: a `json.py`
# left in the home (where SSH commands start) must not stand in for the standard library's.
_PATH = "import sys;sys.path=[p for p in sys.path if p];"
_RUN = (
    "sys.argv.pop(1);sys.path.insert(0,f);import runpy;"
    f'runpy.run_module("{UNIT_PACKAGE}."+sys.argv[1],run_name="__main__",alter_sys=True)'
)
# The kept unit, hashed before anything in it runs: a file planted or changed there never runs.
RUN_STUB = (
    f'{_PATH}import os,hashlib;u=sys.argv[1];f=os.path.expanduser("~/{UNIT_HOME}/%s.pyz"%u);'
    'os.path.isfile(f)and hashlib.sha256(open(f,"rb").read()).hexdigest()==u'
    f' or print("{UNIT_MISSING_SAYS}",u,file=sys.stderr)or sys.exit({UNIT_MISSING});{_RUN}'
)
# The unit as the first line of stdin (base64), hashed, then kept in a new private temporary
# file for this process only (removed at its exit); the rest of stdin is the script's.
CARRY_STUB = (
    f"{_PATH}import os,hashlib,binascii,tempfile,atexit;u=sys.argv[1];"
    "b=binascii.a2b_base64(sys.stdin.buffer.readline());hashlib.sha256(b).hexdigest()==u"
    ' or print("spark-launch: the unit sent is not",u,file=sys.stderr)or sys.exit(1);'
    'd,f=tempfile.mkstemp(".pyz");w=open(d,"wb");w.write(b);w.close();'
    f"atexit.register(os.unlink,f);{_RUN}"
)
