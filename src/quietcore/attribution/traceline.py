"""One line of tracefs's text output: `comm-pid [cpu] flags timestamp:
event: fields` (Documentation/trace/ftrace.rst). In a module of its own,
without numpy, for the readers of stored traces."""

from __future__ import annotations

import re

LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?(?P<ts>\d+(?:\.\d+)?):\s+"
                   r"(?P<event>\w+):\s*(?P<rest>.*)$")  # fmt: skip
