"""The WSGI app for `waitress-serve app:app` or any WSGI server; `python app.py` serves it."""

import sys

if __name__ == "__main__":
    from people_service.cli import main

    sys.exit(main(["serve", *sys.argv[1:]]))
else:
    from people_service.wsgi import app  # noqa: F401
