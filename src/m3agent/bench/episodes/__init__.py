"""Generated evaluation episodes: the catalogue of media pieces, episodes by seed, their facts and
questions, building and running them, and the people-and-order set."""
