#!/usr/bin/env bash
# Source this first in every command on the GPU machine (see ../shared/device/README.md): it installs
# the carried wheels (.whl/, sqlalchemy) and this project, without network, into /tmp.
#   run(command="source scripts/device_env.sh && python3 -m kernelbench verify ...", carry=[".whl"])
python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || return 1
# a fresh /tmp/kb every time: on a machine still warm from an earlier call, `pip install --target` keeps the
# earlier call's package ("Target directory ... already exists") and the command would run stale code (session 22,
# call 5 ran the previous tuned table that way)
rm -rf /tmp/kb
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/kb . >/dev/null || return 1
rm -rf build
export PYTHONPATH=/tmp/kb:/tmp/site:${PYTHONPATH:-}
export PYTHONUNBUFFERED=1
export PYTHONSAFEPATH=1  # never import the uninstalled checkout from the working directory
