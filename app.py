"""The WSGI app for `waitress-serve app:app` (or any WSGI server); `python app.py` serves it."""

import sys

from people_service import ConfigError, create_app
from people_service.cli import main
from people_service.server import bootstrap, exit_cleanly_on_sigterm

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))

try:
    app = create_app()
except ConfigError as exc:
    print(f"people-service: configuration error: {exc}", file=sys.stderr)
    sys.exit(2)
bootstrap(app)
exit_cleanly_on_sigterm()
