"""`python -m people_service.cli`: the people-service command."""

from . import main

raise SystemExit(main())
