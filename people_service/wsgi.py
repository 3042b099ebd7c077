"""The WSGI app for any WSGI server: importing this module builds the app and does nothing else."""

from . import create_app

app = create_app()
