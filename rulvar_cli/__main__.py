"""``python -m rulvar_cli`` runs the ``rulvar`` command."""

from rulvar_cli import main

main()
