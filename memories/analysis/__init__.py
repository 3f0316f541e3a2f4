"""Pure text analysis behind conflicts, meeting briefs and entities: no database, no network.

The modules here decide things about text (is this pair a contradiction, which sentences
are decisions, which names are entities); services decide what to store.
"""
