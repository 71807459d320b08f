"""``python -m rulvar_store`` runs the ``rulvar`` command."""

from rulvar_store._cli import main

main()
