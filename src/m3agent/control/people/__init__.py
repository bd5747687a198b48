"""People and the entity graph at question time: the query plan and the graph's answers, graph facts and
tools, who is who (characters, names), what was said, and people put into words."""
