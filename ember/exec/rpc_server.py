"""``python -m ember.exec.rpc_server``: an RPC server (options: ``--help``; see
``ember.runtime.rpc.server``)."""
import sys

from ember.runtime.rpc.server import main

if __name__ == "__main__":
    sys.exit(main())
