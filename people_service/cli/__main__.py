"""`python -m people_service.cli`: the people-service command."""

import sys

from . import main

sys.exit(main())
