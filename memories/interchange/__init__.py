"""The shapes Cortex speaks with the outside, owned by no interface.

`inputs` validates what clients send (REST and MCP use the same serializers), `representation`
renders memories (REST, MCP, JSONL export), `shapes` renders conflicts and entities (REST and
the UI). Interfaces and import/export build on these; these build on selectors only.
"""
