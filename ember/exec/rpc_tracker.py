"""``python -m ember.exec.rpc_tracker``: an RPC tracker (options: ``--help``; see
``ember.runtime.rpc.tracker``)."""
import sys

from ember.runtime.rpc.tracker import main

if __name__ == "__main__":
    sys.exit(main())
