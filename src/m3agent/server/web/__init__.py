"""The web inspector: its pages, their parts (timeline, swimlanes, people, merges) and browser text."""
