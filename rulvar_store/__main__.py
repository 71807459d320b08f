"""``python -m rulvar_store`` runs the ``rulvar`` command."""

from rulvar_cli import main

main()
