"""Command-line programs run with ``python -m ember.exec.<name>`` (``rpc_server``,
``rpc_tracker``); each is a thin entry point over the module that implements it."""
